"""DQN's policy: the (double) Q-learning loss with Huber TD errors, or C51's
cross-entropy against the projected target distribution; importance-weighted for
prioritized replay; n-step targets discounted by gamma ** n_steps."""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Tuple

import gymnasium as gym
import torch
import torch.nn.functional as F

from rlfleet.algorithms.dqn.dqn_model import DQNModel
from rlfleet.algorithms.dqn.numpy_learner import DQNNumpyLearner
from rlfleet.models.target_network import soft_update
from rlfleet.models.distributions import Categorical
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER, TorchPolicy
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS

SB = SampleBatch


def project_distribution(probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor,
                         v_min: float, v_max: float) -> torch.Tensor:
    """C51's projection of the distribution r + discount * Z onto the fixed support.

    Each atom z_j moves to Tz_j = clip(r + discount * z_j, v_min, v_max), which falls at
    fractional position b_j = (Tz_j - v_min) / dz; its probability is split between the
    neighbouring atoms floor(b_j) and ceil(b_j) in proportion to closeness (all of it to
    b_j when b_j is whole).

    Args:
        probs: `[B, atoms]` probabilities of the next state's chosen action.
        rewards: `[B]` (n-step) rewards.
        discounts: `[B]` gamma ** n_steps, 0 where the episode terminated.
        v_min, v_max: the support's range.

    Returns:
        `[B, atoms]` projected target probabilities.
    """
    atoms = probs.shape[-1]
    support = torch.linspace(v_min, v_max, atoms, dtype=probs.dtype)
    dz = (v_max - v_min) / (atoms - 1)
    tz = (rewards.unsqueeze(-1) + discounts.unsqueeze(-1) * support).clamp(v_min, v_max)
    b = (tz - v_min) / dz
    lower, upper = b.floor(), b.ceil()
    whole = (upper == lower).to(probs.dtype)
    target = torch.zeros_like(probs)
    target.scatter_add_(-1, lower.long(), probs * (upper - b + whole))
    target.scatter_add_(-1, upper.long(), probs * (b - lower))
    return target


def dqn_loss(policy: "DQNTorchPolicy", model: DQNModel, dist_class, batch: Dict[str, torch.Tensor]
             ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """The DQN loss on one replayed batch.

    Args:
        policy: supplies the config (gamma, double_q, num_atoms, v_min, v_max).
        model: the DQNModel (online and target nets).
        dist_class: unused (Q-values are the action distribution's inputs).
        batch: tensors for `DQNTorchPolicy.loss_columns`.

    Returns:
        `(loss, stats)`; `stats["td_error"]` is per sample (the new priorities).
    """
    cfg = policy.config
    actions = batch[SB.ACTIONS].long()
    rows = torch.arange(actions.shape[0])
    discounts = cfg["gamma"] ** batch[N_STEPS].to(torch.float32) * (1.0 - batch[SB.TERMINATEDS].float())
    rewards = batch[SB.REWARDS].float()
    q_t, logits_t = model.q_values(model.q_net, batch[SB.OBS])

    with torch.no_grad():
        q_tp1_target, logits_tp1_target = model.q_values(model.target_q_net, batch[SB.NEXT_OBS])
        if cfg["double_q"]:
            # Double Q-learning (van Hasselt et al. 2016): the online net picks, the target net rates.
            best = model.q_values(model.q_net, batch[SB.NEXT_OBS])[0].argmax(-1)
        else:
            best = q_tp1_target.argmax(-1)

    if logits_t is None:
        q_selected = q_t[rows, actions]
        target = rewards + discounts * q_tp1_target[rows, best]
        td_error = q_selected - target
        per_sample = F.huber_loss(q_selected, target, reduction="none", delta=1.0)
        stats = {"mean_q": q_selected.mean().detach(), "min_q": q_selected.min().detach(),
                 "max_q": q_selected.max().detach()}
    else:
        with torch.no_grad():
            probs_best = F.softmax(logits_tp1_target[rows, best], dim=-1)
            target_probs = project_distribution(probs_best, rewards, discounts, cfg["v_min"], cfg["v_max"])
        per_sample = -(target_probs * F.log_softmax(logits_t[rows, actions], dim=-1)).sum(-1)
        td_error = per_sample
        stats = {"mean_q": q_t[rows, actions].mean().detach()}
    loss = (batch[PRIO_WEIGHTS].float() * per_sample).mean()
    stats.update(loss=loss.detach(), mean_td_error=td_error.abs().mean().detach(), td_error=td_error.detach())
    return loss, stats


class DQNTorchPolicy(TorchPolicy):
    """Acts (epsilon-)greedily on Q-values; learns with `dqn_loss`."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS, PRIO_WEIGHTS)
    # The NumPy learner (numpy_learner.py), used where `fast_plan` picks it (policy/fast_plan.py).
    numpy_learner = DQNNumpyLearner

    def __init__(self, observation_space, action_space, config, **kwargs):
        if not isinstance(action_space, gym.spaces.Discrete):
            hint = ("SAC, DDPG or TD3 for Box actions" if isinstance(action_space, gym.spaces.Box)
                    else "PPO or PG, which take every action space")
            raise ValueError(f"DQN (and SimpleQ) needs a Discrete action space, got {action_space}; use {hint}")
        super().__init__(observation_space, action_space, config, **kwargs)
        self.model.set_noise(True, self.generator)

    def make_model_and_action_dist(self):
        cfg = self.config
        q_config = {k: cfg[k] for k in ("hiddens", "dueling", "num_atoms", "v_min", "v_max", "noisy", "sigma0")}
        model = DQNModel(self.observation_space, self.action_space, int(self.action_space.n), cfg["model"],
                         f"{self.policy_id}_dqn", q_config=q_config)
        return Categorical, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        # Only the online net learns; the target net follows it in `update_target`.
        return {DEFAULT_OPTIMIZER: self.make_adam(self.model.q_net.parameters(), lr=self.cur_lr,
                                                  eps=self.config["adam_epsilon"])}

    def compute_actions(self, obs_batch, state_batches=None, *args, explore=None, **kwargs):
        explore = self.config.get("explore", True) if explore is None else explore
        if explore:
            return super().compute_actions(obs_batch, state_batches, *args, explore=explore, **kwargs)
        with self.acting_greedily():
            return super().compute_actions(obs_batch, state_batches, *args, explore=explore, **kwargs)

    @contextlib.contextmanager
    def acting_greedily(self) -> Iterator[None]:
        """Noisy nets explore through their noise: greedy acting (and an export) turns it off."""
        if not self.config["noisy"]:
            yield
            return
        self.model.set_noise(False)
        try:
            yield
        finally:
            self.model.set_noise(True)

    def loss(self, model, dist_class, train_batch):
        return dqn_loss(self, model, dist_class, train_batch)

    def update_target(self, tau: float = 1.0) -> None:
        """Copies the online Q-network into the target network (tau < 1: Polyak average)."""
        soft_update(self.model.target_q_net, self.model.q_net, tau)
