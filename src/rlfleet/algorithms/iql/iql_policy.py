"""IQL's policy: implicit Q-learning (Kostrikov et al. 2021, "Offline Reinforcement Learning
with Implicit Q-Learning", arXiv:2110.06169).

IQL never evaluates Q at an action the data does not hold: V(s) is an upper expectile of
Q(s, a) over the logged actions, Q is regressed on r + gamma V(s'), and the policy is
extracted by advantage-weighted regression of the logged actions."""
from __future__ import annotations

from typing import Dict, Tuple

import torch

from rlfleet.algorithms.common.offline_actor_critic import (OfflineActorCriticPolicy, bellman_discounts,
                                                            critic_regression)
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import PRIO_WEIGHTS

SB = SampleBatch


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """L_2^tau(u) = |tau - 1(u < 0)| * u^2 per element (the paper's eq. 3), u = Q - V."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return weight * diff.pow(2)


def iql_losses(policy: "IQLTorchPolicy", model, dist_class, batch: Dict[str, torch.Tensor]
               ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """IQL's three losses on one batch of logged transitions (s, a, r, s').

    value: E[w_prio * L_2^expectile(min_i Q'_i(s, a) - V(s))] (target Q-nets, as the paper's code);
    critic: sum_i 0.5 * E[w_prio * (Q_i(s, a) - (r + gamma^n * (1 - terminated) * V(s')))^2];
    actor: -E[min(exp(beta * (min_i Q'_i(s, a) - V(s))), max_weight) * log pi(a|s)] (no gradient
        through the weights).
    With Discrete actions Q(s, a) is the Q-net's output for the logged action.

    Returns:
        `({"value", "critic", "actor": loss}, stats)`; `stats["td_error"]` per row.
    """
    cfg = policy.config
    obs, next_obs, actions = batch[SB.OBS], batch[SB.NEXT_OBS], batch[SB.ACTIONS]
    weights = batch[PRIO_WEIGHTS].float()
    q_of = policy.logged_action_q
    with torch.no_grad():
        q_target = q_of(model.target_q_nets, obs, actions)
        target = batch[SB.REWARDS].float() + bellman_discounts(batch, cfg["gamma"]) * model.state_value(next_obs)

    # === value: expectile regression on Q of the logged actions ===
    v = model.state_value(obs)
    value_loss = (weights * expectile_loss(q_target - v, cfg["expectile"])).mean()

    # === critic ===
    q_values = [q_of([net], obs, actions) for net in model.q_nets]
    critic_loss, td_error = critic_regression(q_values, target, weights)

    # === actor: advantage-weighted regression ===
    advantages = (q_target - v).detach()
    exp_adv = torch.clamp(torch.exp(cfg["beta"] * advantages), max=cfg["max_weight"])
    actor_loss = -(exp_adv * dist_class(model.policy_inputs(obs), model).logp(actions)).mean()

    stats = {
        "value_loss": value_loss.detach(), "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
        "mean_v": v.mean().detach(), "mean_q": q_values[0].mean().detach(), "mean_advantage": advantages.mean(),
        "mean_weight": exp_adv.mean(), "clipped_weight_fraction": (exp_adv >= cfg["max_weight"]).float().mean(),
        "mean_td_error": td_error.mean(), "td_error": td_error,
    }
    return {"value": value_loss, "critic": critic_loss, "actor": actor_loss}, stats


class IQLTorchPolicy(OfflineActorCriticPolicy):
    """SAC's networks (no entropy temperature) plus a value net, with IQL's losses; Box and
    Discrete actions."""

    _name = "IQL"
    supports_discrete = True
    value_net = True

    def loss(self, model, dist_class, train_batch):
        return iql_losses(self, model, dist_class, train_batch)


__all__ = ["IQLTorchPolicy", "expectile_loss", "iql_losses"]
