"""QMIX's policy: acts epsilon-greedily per member over its legal actions with the shared
Q-network, and learns on replayed episodes (replay/sequences.py) with the team's
one-step double-Q target through the mixer."""
from __future__ import annotations

from typing import Dict, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.algorithms.qmix.group_layout import GroupLayout
from rlfleet.algorithms.qmix.qmix_model import QMIXModel, QMixer
from rlfleet.algorithms.common.sequence_learning import (SEQUENCE_COLUMNS, bootstrap_rows, loss_rows, masked_mean,
                                                  sequence_states, sequence_tensors)
from rlfleet.models.distributions import Categorical
from rlfleet.models.target_network import soft_update
from rlfleet.policy.numpy_actor import obs_array
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER, TorchPolicy
from rlfleet.replay import N_STEPS

SB = SampleBatch


def _trimmed(batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The replayed sequences cut to their longest one (plus the bootstrap observation):
    sequences are stored padded to `model.max_seq_len`, often far longer than the episodes."""
    t = int(batch[SB.SEQ_LENS].max())
    out = dict(batch)
    for col in (SB.ACTIONS, SB.REWARDS, SB.TERMINATEDS, N_STEPS):
        out[col] = batch[col][:, :t]
    out[SB.OBS] = batch[SB.OBS][:, :t + 1]
    return out


def qmix_loss(policy: "QMIXTorchPolicy", model: QMIXModel, dist_class, batch: Dict[str, torch.Tensor]
              ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """The QMIX loss on replayed episodes (sequences).

    Both agent networks rate every stored observation, run from each sequence's start
    (`zero_init_states`: from zeros, else from the memory it acted with). Row t's target is `r_t + gamma (1 - terminated_t) Q_tot^target(s_{t+1}, a*)`, with
    each member's `a*` the argmax of the online net (double Q) or of the target net, over its
    legal actions; `Q_tot` is the mixer's (without one, each member's own Q learns the team's
    reward). The squared TD error is averaged over the sequences' real rows.

    Returns:
        `(loss, stats)`; `stats["td_error"]` is each sequence's mean absolute TD error.
    """
    cfg = policy.config
    batch = _trimmed(batch)
    layout = model.layout
    actions = batch[SB.ACTIONS].long()  # [S, T, n]
    length = actions.shape[1]
    obs = batch[SB.OBS].float()  # [S, T + 1, D]
    start = sequence_states(policy, batch)
    q, _ = model.member_q(model.agent, obs, start)  # [S, T + 1, n, A]
    with torch.no_grad():
        q_target, _ = model.member_q(model.target_agent, obs, start)
    chosen = q[:, :length].gather(-1, actions.unsqueeze(-1)).squeeze(-1)  # [S, T, n]
    with torch.no_grad():
        q_boot_target = bootstrap_rows(batch, q_target)
        picker = bootstrap_rows(batch, q.detach()) if cfg["double_q"] else q_boot_target
        target_max = q_boot_target.gather(-1, picker.argmax(-1, keepdim=True)).squeeze(-1)  # [S, T, n]
    states = layout.state(obs)
    if model.mixer is not None:
        chosen = model.mixer(chosen, states[:, :length])  # [S, T]
        with torch.no_grad():
            target_max = model.target_mixer(target_max, bootstrap_rows(batch, states))
        rewards, not_done = batch[SB.REWARDS].float(), 1.0 - batch[SB.TERMINATEDS].float()
    else:
        rewards = batch[SB.REWARDS].float()[..., None]
        not_done = 1.0 - batch[SB.TERMINATEDS].float()[..., None]
    target = rewards + cfg["gamma"] * not_done * target_max
    mask = loss_rows(batch, length)
    if model.mixer is None:
        mask = mask[..., None].expand_as(chosen)
    td_error = chosen - target.detach()
    loss = masked_mean(td_error ** 2, mask)
    abs_td = torch.where(mask, td_error.detach().abs(), torch.zeros(()))
    per_sequence = abs_td.reshape(abs_td.shape[0], -1).sum(1) / mask.reshape(mask.shape[0], -1).sum(1).clamp_min(1)
    picked = chosen.detach()[mask]
    stats = {"loss": loss.detach(), "mean_q": picked.mean(), "min_q": picked.min(), "max_q": picked.max(),
             "mean_td_error": masked_mean(abs_td, mask), "mean_target": target[mask].mean(),
             "td_error": per_sequence}
    return loss, stats


class QMIXTorchPolicy(TorchPolicy):
    """QMIX / VDN / independent Q-learners for one group of agents (its Tuple
    observations and actions: see group_layout.py)."""

    loss_columns = SEQUENCE_COLUMNS

    def __init__(self, observation_space, action_space, config, **kwargs):
        # A clear error before any network is built.
        GroupLayout(observation_space, action_space, config["model"].get("action_mask_key") or "action_mask")
        # RLlib 1.x's QMIX configs name the gradient-norm clip `grad_norm_clipping`; the loop reads grad_clip.
        super().__init__(observation_space, action_space, dict(config, grad_clip=config["grad_norm_clipping"]),
                         **kwargs)

    def exploration_space(self) -> gym.Space:
        """Epsilon-greedy draws each member's action on its own, from its Discrete space."""
        return self.action_space.spaces[0]

    def make_model_and_action_dist(self):
        cfg = self.config
        model = QMIXModel(self.observation_space, self.action_space, 0, cfg["model"], f"{self.policy_id}_qmix",
                          mixer=cfg["mixer"], mixing_embed_dim=cfg["mixing_embed_dim"],
                          agent_network=cfg["agent_network"])
        return Categorical, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        cfg = self.config
        return {DEFAULT_OPTIMIZER: torch.optim.RMSprop(self.model.learnable_parameters(), lr=self.cur_lr,
                                                       alpha=cfg["optim_alpha"], eps=cfg["optim_eps"])}

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs):
        explore = self.config.get("explore", True) if explore is None else explore
        timestep = self.global_timestep if timestep is None else timestep
        obs = torch.as_tensor(obs_array(obs_batch)).float()
        n, num_actions = self.model.layout.n_agents, self.model.layout.num_actions
        # The members' memories (the GRU's): given by the sampler, else the episode's start.
        state = [torch.as_tensor(np.asarray(s, np.float32)) for s in state_batches or []]
        if not state:
            state = [s.expand(len(obs), *s.shape) for s in self.model.get_initial_state()]
        with torch.inference_mode():
            q, state_out = self.model({SB.OBS: obs.to(self.device)}, [s.to(self.device) for s in state], None)
            q = q.cpu()
            # Each member explores on its own (RLlib 1.x's QMIX folds members into the batch for epsilon-greedy).
            dist = self.dist_class(q.reshape(-1, num_actions), self.model)
            actions, _ = self.exploration.get_exploration_action(dist, explore, timestep, self.generator)
        b = len(obs)
        extra = {SB.ACTION_DIST_INPUTS: q.numpy(), SB.ACTION_LOGP: np.zeros(b, np.float32),
                 SB.ACTION_PROB: np.ones(b, np.float32)}
        return actions.reshape(b, n).numpy(), [s.cpu().numpy() for s in state_out], extra

    def to_tensors(self, batch: SampleBatch) -> Dict[str, torch.Tensor]:
        """The replayed sequences' columns as tensors, as stored (see replay/sequences.py)."""
        return sequence_tensors(self, batch, self.loss_columns)

    def loss(self, model, dist_class, train_batch):
        return qmix_loss(self, model, dist_class, train_batch)

    def update_target(self, tau: float = 1.0) -> None:
        """Copies the online agent network and mixer into their targets (tau < 1: Polyak average)."""
        soft_update(self.model.target_agent, self.model.agent, tau)
        if isinstance(self.model.mixer, QMixer):  # VDN's sum and independent learners have no mixer weights
            soft_update(self.model.target_mixer, self.model.mixer, tau)


__all__ = ["QMIXTorchPolicy", "qmix_loss"]
