"""R2D2's policy: acts epsilon-greedily on a recurrent Q-network, learns on replayed sequences
(replay/sequences.py) with double-Q n-step targets, the invertible value rescaling h, and a
loss only on the rows after each sequence's burn-in."""
from __future__ import annotations

from typing import Dict, Tuple

import gymnasium as gym
import torch
import torch.nn.functional as F

from rlfleet.algorithms.r2d2.r2d2_model import R2D2Model
from rlfleet.algorithms.common.sequence_learning import (SEQUENCE_COLUMNS, bootstrap_rows, loss_rows, masked_mean,
                                                  run_sequences, sequence_states, sequence_tensors)
from rlfleet.models.distributions import Categorical
from rlfleet.models.target_network import soft_update
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER, TorchPolicy
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.replay.sequences import sequence_priorities

SB = SampleBatch


def h_function(x: torch.Tensor, eps: float) -> torch.Tensor:
    """R2D2's value rescaling h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def h_inverse(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The inverse of `h_function` (Pohlen et al. 2018, proposition A.2)."""
    root = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (root ** 2 - 1.0)


def r2d2_loss(policy: "R2D2TorchPolicy", model: R2D2Model, dist_class, batch: Dict[str, torch.Tensor]
              ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """The R2D2 loss on replayed sequences.

    Both networks run over every stored row from the sequence's start state; row t's target
    is `h(R_t + gamma^k (1 - terminated) h^-1(Q_target(o_{t+k}, argmax_a Q(o_{t+k}, a))))`
    with the n-step return R_t over k steps (h the identity without `use_h_function`). The
    Huber TD loss is averaged over the trained rows only, importance-weighted per sequence.

    Returns:
        `(loss, stats)`; `stats["td_error"]` is each sequence's priority
        `eta * max + (1 - eta) * mean` of its rows' absolute TD errors.
    """
    cfg = policy.config
    actions = batch[SB.ACTIONS].long()
    length = actions.shape[1]
    state = sequence_states(policy, batch)
    q = run_sequences(model.q_net, batch, state)
    with torch.no_grad():
        q_target = run_sequences(model.target_q_net, batch, state)
    q_selected = q[:, :length].gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        q_boot_target = bootstrap_rows(batch, q_target)
        # Double Q-learning: the online net picks the action, the target net rates it.
        picker = bootstrap_rows(batch, q.detach()) if cfg["double_q"] else q_boot_target
        q_next = q_boot_target.gather(-1, picker.argmax(-1, keepdim=True)).squeeze(-1)
        discounts = cfg["gamma"] ** batch[N_STEPS].float() * (1.0 - batch[SB.TERMINATEDS].float())
        rewards = batch[SB.REWARDS].float()
        if cfg["use_h_function"]:
            eps = cfg["h_function_epsilon"]
            target = h_function(rewards + discounts * h_inverse(q_next, eps), eps)
        else:
            target = rewards + discounts * q_next
    mask = loss_rows(batch, length)
    td_error = q_selected - target
    per_row = F.huber_loss(q_selected, target, reduction="none", delta=1.0)
    loss = masked_mean(batch[PRIO_WEIGHTS].float()[:, None] * per_row, mask)
    abs_td = torch.where(mask, td_error.detach().abs(), torch.zeros(()))
    priorities = sequence_priorities(abs_td.cpu().numpy(), mask.cpu().numpy(), cfg["prioritized_replay_eta"])
    chosen = q_selected.detach()[mask]
    stats = {"loss": loss.detach(), "mean_q": chosen.mean(), "min_q": chosen.min(), "max_q": chosen.max(),
             "mean_td_error": masked_mean(abs_td, mask), "td_error": torch.as_tensor(priorities)}
    return loss, stats


class R2D2TorchPolicy(TorchPolicy):
    """Recurrent DQN: acts (epsilon-)greedily on Q-values with the memory carried from step
    to step; learns with `r2d2_loss` on replayed sequences."""

    loss_columns = SEQUENCE_COLUMNS

    def __init__(self, observation_space, action_space, config, **kwargs):
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"R2D2 needs a Discrete action space, got {action_space}; use RNNSAC (recurrent SAC) "
                             "or PPO with model.use_lstm for other action spaces")
        super().__init__(observation_space, action_space, config, **kwargs)

    def make_model_and_action_dist(self):
        cfg = self.config
        model = R2D2Model(self.observation_space, self.action_space, int(self.action_space.n), cfg["model"],
                          f"{self.policy_id}_r2d2", q_config={"hiddens": cfg["hiddens"], "dueling": cfg["dueling"]})
        return Categorical, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        # Only the online net learns; the target net follows it in `update_target`.
        return {DEFAULT_OPTIMIZER: self.make_adam(self.model.q_net.parameters(), lr=self.cur_lr,
                                                  eps=self.config["adam_epsilon"])}

    def to_tensors(self, batch: SampleBatch) -> Dict[str, torch.Tensor]:
        """The replayed sequences' columns as tensors, as stored (see replay/sequences.py)."""
        return sequence_tensors(self, batch, self.loss_columns)

    def loss(self, model, dist_class, train_batch):
        return r2d2_loss(self, model, dist_class, train_batch)

    def update_target(self, tau: float = 1.0) -> None:
        """Copies the online Q-network into the target network (tau < 1: Polyak average)."""
        soft_update(self.model.target_q_net, self.model.q_net, tau)


__all__ = ["R2D2TorchPolicy", "h_function", "h_inverse", "r2d2_loss"]
