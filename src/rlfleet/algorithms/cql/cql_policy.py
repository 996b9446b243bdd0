"""CQL's policy: SAC's networks with a conservative critic (Kumar et al. 2020,
"Conservative Q-Learning for Offline Reinforcement Learning", the CQL(H) variant).

The critic's Bellman error gets a penalty that pushes Q down on actions the data does not
hold (a soft maximum over random and policy actions) and up on the logged actions; the
actor is cloned from the data for its first `bc_iters` updates, then trained as SAC's."""
from __future__ import annotations

from typing import Dict, List, Tuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfleet.algorithms.sac.sac_model import SACModel
from rlfleet.algorithms.common.off_policy_common import frozen
from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.utils.spaces import policy_action_bounds

SB = SampleBatch


# Rows per Q-net pass: bigger passes leave the CPU caches (measured: one 7936-row pass of a
# 256x256 net is slower than four ~2k-row ones), smaller ones pay per-call overhead.
_Q_CHUNK_ROWS = 2048


def ensemble_q(nets: List[nn.Module], x: torch.Tensor) -> torch.Tensor:
    """`[E, N]`: each continuous-action Q-net of `nets` on the rows `x` `[N, obs + act]`."""
    n = x.shape[0]
    return torch.stack([net(x).squeeze(-1) if n <= _Q_CHUNK_ROWS else
                        torch.cat([net(part).squeeze(-1) for part in torch.split(x, _Q_CHUNK_ROWS)])
                        for net in nets])


def _q_inputs(obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """`concat(flat obs, actions)` rows, as SACModel.q builds them."""
    return torch.cat([obs.reshape(obs.shape[0], -1).float(), actions.reshape(actions.shape[0], -1).float()], dim=-1)


def conservative_gap(q_ood: torch.Tensor, q_data: torch.Tensor, temperature: float) -> torch.Tensor:
    """temperature * mean_s logsumexp_j(q_ood[..., s, j] / temperature) - mean_s q_data[..., s]:
    how far the soft maximum of Q over sampled actions lies above Q of the logged actions.

    Args:
        q_ood: `[..., B, K]` Q-values of the sampled actions, each already minus its
            log-density (importance correction of the sampling distribution).
        q_data: `[..., B]` Q-values of the logged actions.
        temperature: the logsumexp temperature.

    Returns:
        `[...]`: one gap per leading index (one per Q-net), a scalar for 2-D `q_ood`.
    """
    return temperature * torch.logsumexp(q_ood / temperature, dim=-1).mean(-1) - q_data.mean(-1)


def cql_losses(policy: "CQLTorchPolicy", model: SACModel, dist_class, batch: Dict[str, torch.Tensor]
               ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """CQL's losses on one batch of logged transitions.

    critic: SAC's 0.5 * E[(Q_i(s, a) - y)^2] per Q-net with y = r + gamma^n * (1 - terminated)
        * min_i Q'_i(s', a'), a' ~ pi(.|s') (no entropy term in the target, as RLlib 1.x's
        `cql_torch_policy.py`), plus per Q-net min_q_weight * gap_i (times alpha' and minus lagrangian_thresh
        with `lagrangian`), gap_i = `conservative_gap` over `num_actions` uniform actions
        (minus log of their density), `num_actions` actions of pi(.|s) and of pi(.|s')
        (minus their log-probabilities), all evaluated at s;
    actor: for the first `bc_iters` updates E[alpha * log pi(a~|s) - log pi(a|s)] (behaviour
        cloning of the logged action a), then SAC's E[alpha * log pi(a~|s) - min_i Q_i(s, a~)];
    alpha: SAC's entropy-temperature loss;
    alpha_prime (with `lagrangian`): -alpha' * mean_i(min_q_weight * gap_i - lagrangian_thresh),
        so alpha' grows while the gap exceeds the threshold and shrinks below it.

    Cost: the policy net runs once on s (with gradient) and once on s' (without); the
    `num_actions` draws per state reuse those outputs. Each Q-net runs once over the logged
    and all 3 * num_actions sampled actions (in cache-sized chunks, `ensemble_q`).

    Returns:
        `({"critic", "actor", "alpha"[, "alpha_prime"]: loss}, stats)`.
    """
    cfg = policy.config
    gen = policy.generator
    n_act = int(cfg["num_actions"])
    temp = float(cfg["temperature"])
    obs, next_obs, actions = batch[SB.OBS], batch[SB.NEXT_OBS], batch[SB.ACTIONS].float()
    rewards = batch[SB.REWARDS].float()
    discounts = cfg["gamma"] ** batch[N_STEPS].float() * (1.0 - batch[SB.TERMINATEDS].float())
    weights = batch[PRIO_WEIGHTS].float()
    alpha = torch.exp(model.log_alpha)
    q_nets, target_nets = policy.q_nets, policy.target_q_nets
    bsz = obs.shape[0]

    # === actor and alpha ===
    pi_out_t = model.policy_inputs(obs)
    dist_t = dist_class(pi_out_t, model)
    a_t, logp_t = dist_t.sample_logp(gen)
    bc_phase = policy.num_grad_updates < cfg["bc_iters"]
    if bc_phase:
        actor_loss = (alpha.detach() * logp_t - dist_t.logp(actions)).mean()
    else:
        with frozen(model.q_parameters()):
            q_pi = ensemble_q(q_nets, _q_inputs(obs, a_t)).min(dim=0).values
        actor_loss = (alpha.detach() * logp_t - q_pi).mean()
    alpha_loss = -(model.log_alpha * (logp_t + policy.target_entropy).detach()).mean()

    with torch.no_grad():
        # === Bellman target (no entropy bonus) ===
        pi_out_tp1 = model.policy_inputs(next_obs)
        a_tp1, _ = dist_class(pi_out_tp1, model).sample_logp(gen)
        target = rewards + discounts * ensemble_q(target_nets, _q_inputs(next_obs, a_tp1)).min(dim=0).values

        # === out-of-distribution actions at s: uniform, pi(.|s), pi(.|s'), num_actions each ===
        low, high = policy.action_low, policy.action_high
        act_dim = low.shape[0]
        a_rand = low + (high - low) * torch.rand((bsz * n_act, act_dim), generator=gen)
        log_density_rand = -torch.log(high - low).sum()
        # pi(.|s) and pi(.|s') share one draw of 2 * B * num_actions actions.
        pi_rep = torch.cat([pi_out_t.detach(), pi_out_tp1]).repeat_interleave(n_act, dim=0)
        a_pi, logp_pi = dist_class(pi_rep, model).sample_logp(gen)
        # [3, B, K]: each sampled action's log-density, subtracted from its Q below.
        log_density = torch.cat([log_density_rand.expand(bsz * n_act), logp_pi]).view(3, bsz, n_act)
        # Row (source, b, k) of the [3 * B * K] sampled actions pairs with state b.
        obs_rep = obs.reshape(bsz, -1).repeat_interleave(n_act, dim=0).repeat(3, 1)
        x_ood = _q_inputs(obs_rep, torch.cat([a_rand, a_pi]))

    # === critic: both Q-nets on the logged and the sampled actions in one pass ===
    q_all = ensemble_q(q_nets, torch.cat([_q_inputs(obs, actions), x_ood]))  # [E, B + 3 B K]
    q_data = q_all[:, :bsz]
    q_ood = (q_all[:, bsz:].view(-1, 3, bsz, n_act) - log_density).permute(0, 2, 1, 3).reshape(-1, bsz, 3 * n_act)
    td = q_data - target
    bellman = 0.5 * (weights * td.pow(2)).mean(dim=1).sum()
    gaps = cfg["min_q_weight"] * conservative_gap(q_ood, q_data, temp)  # [E]
    alpha_prime = None
    if cfg["lagrangian"]:
        alpha_prime = torch.clamp(torch.exp(model.log_alpha_prime), 0.0, 1e6)
        critic_loss = bellman + (alpha_prime.detach() * (gaps - cfg["lagrangian_thresh"])).sum()
    else:
        critic_loss = bellman + gaps.sum()
    penalty = gaps.mean()
    td_error = td.abs().mean(dim=0)

    losses = {"critic": critic_loss, "actor": actor_loss, "alpha": alpha_loss}
    stats = {
        "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "alpha_loss": alpha_loss.detach(),
        "alpha_value": alpha.detach(), "cql_penalty": penalty.detach(), "bc_phase": torch.tensor(float(bc_phase)),
        "policy_entropy": -logp_t.mean().detach(), "mean_q": q_data[0].mean().detach(),
        "mean_td_error": td_error.mean().detach(), "td_error": td_error.detach(),
    }
    if alpha_prime is not None:
        # Dual ascent on alpha': its loss's gradient is -(penalty - thresh).
        losses["alpha_prime"] = -alpha_prime * (penalty.detach() - cfg["lagrangian_thresh"])
        stats.update(alpha_prime_value=alpha_prime.detach(), alpha_prime_loss=losses["alpha_prime"].detach())
    return losses, stats


class CQLTorchPolicy(SACTorchPolicy):
    """SAC's policy with CQL's losses (continuous actions); with `lagrangian`, a fourth
    optimizer tunes alpha' (kept in the model as `log_alpha_prime`, so it syncs and
    checkpoints with the weights)."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS, PRIO_WEIGHTS)

    def __init__(self, observation_space, action_space, config, **kwargs):
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"CQL supports Box action spaces only, got {action_space}; for discrete actions "
                             "use DQN, or BC / MARWIL on offline data")
        super().__init__(observation_space, action_space, config, **kwargs)
        low, high = policy_action_bounds(action_space, config["normalize_actions"])
        self.action_low = torch.as_tensor(np.asarray(low, np.float32).reshape(-1))
        self.action_high = torch.as_tensor(np.asarray(high, np.float32).reshape(-1))

    @property
    def q_nets(self) -> List[nn.Module]:
        return self.model.q_nets

    @property
    def target_q_nets(self) -> List[nn.Module]:
        return self.model.target_q_nets

    def make_model_and_action_dist(self):
        dist_class, model = super().make_model_and_action_dist()
        if self.config["lagrangian"]:
            model.log_alpha_prime = nn.Parameter(torch.zeros((), dtype=torch.float32))  # alpha' starts at 1
        return dist_class, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        optimizers = super().make_optimizers()
        if self.config["lagrangian"]:
            # alpha' steps with the critic's learning rate, as in RLlib 1.x's `cql_torch_policy.py` (no key of its own).
            optimizers["alpha_prime"] = self.make_adam([self.model.log_alpha_prime],
                                                       lr=self.config["optimization"]["critic_learning_rate"],
                                                       eps=1e-7)
        return optimizers

    def loss(self, model, dist_class, train_batch):
        return cql_losses(self, model, dist_class, train_batch)
