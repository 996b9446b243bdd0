"""CRR's policy: critic-regularised regression (Wang et al. 2020, "Critic Regularized
Regression", arXiv:2006.15134), Box and Discrete actions.

The critic is learnt by TD on the logged transitions, bootstrapping from the policy's actions;
the actor by regressing the logged actions, each weighted by f(A(s, a)): 1[A > 0] (`bin`) or
min(exp(A / temperature), max_weight) (`exp`), with A(s, a) = Q(s, a) - V(s) and V(s) the mean
or the max of Q over `n_action_sample` actions of pi(.|s)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import torch
from torch import nn

from rlfleet.algorithms.common.offline_actor_critic import (OfflineActorCriticPolicy, bellman_discounts,
                                                            critic_regression)
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import PRIO_WEIGHTS

SB = SampleBatch


def advantage_weights(advantages: torch.Tensor, weight_type: str, temperature: float, max_weight: float
                      ) -> torch.Tensor:
    """f(A): 1[A > 0] for "bin", min(exp(A / temperature), max_weight) for "exp"."""
    if weight_type == "bin":
        return (advantages > 0).float()
    return torch.clamp(torch.exp(advantages / temperature), max=max_weight)


def sampled_q(policy: "CRRTorchPolicy", nets: List[nn.Module], obs: torch.Tensor, pi_inputs: torch.Tensor,
              num: int) -> torch.Tensor:
    """`[B, num]`: the smallest of `nets`' Q(s, a_j) at `num` actions a_j ~ pi(.|s) per state."""
    bsz = obs.shape[0]
    actions = policy.dist_class(pi_inputs.repeat_interleave(num, dim=0), policy.model).sample(policy.generator)
    obs_rep = obs.repeat_interleave(num, dim=0)
    if policy.model.discrete:
        return policy.min_q(nets, obs_rep).gather(1, actions.long().unsqueeze(-1)).view(bsz, num)
    return policy.min_q(nets, obs_rep, actions).view(bsz, num)


def state_values(policy: "CRRTorchPolicy", nets: List[nn.Module], obs: torch.Tensor, pi_inputs: torch.Tensor,
                 how: str) -> torch.Tensor:
    """V(s) `[B]` under pi for `nets` (their minimum): "mean" (for Discrete actions the exact
    expectation sum_a pi(a|s) Q(s, a)) or "max" of Q over `n_action_sample` sampled actions."""
    if how == "mean" and policy.model.discrete:
        return (torch.softmax(pi_inputs, dim=-1) * policy.min_q(nets, obs)).sum(-1)
    q = sampled_q(policy, nets, obs, pi_inputs, int(policy.config["n_action_sample"]))
    return q.mean(-1) if how == "mean" else q.max(-1).values


def crr_losses(policy: "CRRTorchPolicy", model, dist_class, batch: Dict[str, torch.Tensor]
               ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """CRR's losses on one batch of logged transitions (s, a, r, s').

    critic: sum_i 0.5 * E[w_prio * (Q_i(s, a) - y)^2], y = r + gamma^n * (1 - terminated) *
        V'(s'), V'(s') the mean of min_i Q'_i(s', a') over `n_action_sample` actions a' ~ pi(.|s')
        (the exact expectation for Discrete actions);
    actor: -E[f(A(s, a)) * log pi(a|s)], A(s, a) = min_i Q_i(s, a) - V(s), V(s) by
        `advantage_type` (`state_values`), f by `weight_type` (`advantage_weights`); no gradient
        flows through the weights.

    Returns:
        `({"critic", "actor": loss}, stats)`; `stats["td_error"]` per row.
    """
    cfg = policy.config
    obs, next_obs, actions = batch[SB.OBS], batch[SB.NEXT_OBS], batch[SB.ACTIONS]
    pi_t = model.policy_inputs(obs)
    q_nets, target_nets = model.q_nets, model.target_q_nets

    with torch.no_grad():
        # === Bellman target, advantages and their weights ===
        v_tp1 = state_values(policy, target_nets, next_obs, model.policy_inputs(next_obs), "mean")
        target = batch[SB.REWARDS].float() + bellman_discounts(batch, cfg["gamma"]) * v_tp1
        q_data = policy.logged_action_q(q_nets, obs, actions)
        advantages = q_data - state_values(policy, q_nets, obs, pi_t.detach(), cfg["advantage_type"])
        weights = advantage_weights(advantages, cfg["weight_type"], cfg["temperature"], cfg["max_weight"])

    # === actor: weighted regression of the logged actions ===
    actor_loss = -(weights * dist_class(pi_t, model).logp(actions)).mean()

    # === critic ===
    q_values = [policy.logged_action_q([net], obs, actions) for net in q_nets]
    critic_loss, td_error = critic_regression(q_values, target, batch[PRIO_WEIGHTS].float())

    stats = {
        "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "mean_q": q_values[0].mean().detach(),
        "mean_advantage": advantages.mean(), "mean_weight": weights.mean(),
        "positive_advantage_fraction": (advantages > 0).float().mean(),
        "mean_td_error": td_error.mean(), "td_error": td_error,
    }
    return {"critic": critic_loss, "actor": actor_loss}, stats


class CRRTorchPolicy(OfflineActorCriticPolicy):
    """SAC's networks (no entropy temperature) with CRR's losses; Box and Discrete actions."""

    _name = "CRR"
    supports_discrete = True

    def loss(self, model, dist_class, train_batch):
        return crr_losses(self, model, dist_class, train_batch)


__all__ = ["CRRTorchPolicy", "advantage_weights", "crr_losses", "state_values"]
