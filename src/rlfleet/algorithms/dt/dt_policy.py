"""The Decision Transformer policy: acting with a rolling context (dt_model.py), and the
supervised loss on segments of offline episodes (segments.py).

Loss (Chen et al. 2021, arXiv:2106.01345, section 3): the action predicted at each real
step of a segment against the logged one, mean squared error of the tanh outputs for Box
actions (normalized to [-1, 1]) and cross-entropy for Discrete; with `loss_coef_obs` /
`loss_coef_returns_to_go` > 0 also the next observation's and return-to-go's squared errors
(RLlib 2.x's optional heads).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.algorithms.ddpg.ddpg_policy import Deterministic
from rlfleet.algorithms.dt.dt_model import DTModel
from rlfleet.algorithms.dt.segments import ATTENTION_MASK, RETURNS_TO_GO, TIMESTEPS
from rlfleet.models.distributions import Categorical
from rlfleet.policy.acting_state import act_torch
from rlfleet.policy.learning_loop import DEFAULT_OPTIMIZER
from rlfleet.policy.optimizer_choice import check_adam_options
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.tensor_batch import TensorBatch, as_tensor
from rlfleet.policy.torch_policy import TorchPolicy

SB = SampleBatch


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def dt_loss(policy: "DTTorchPolicy", model: DTModel, dist_class, batch: Dict[str, torch.Tensor]
            ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """`loss_coef_actions * action loss (+ the optional heads' losses)` over the real steps
    of `[B, K]` segments (see the module docstring)."""
    cfg = policy.config
    model.train()  # dropout on while learning (acting switches it off)
    mask = batch[ATTENTION_MASK]
    actions = batch[SB.ACTIONS]
    actions_in = model_action_input(model, actions)
    preds = model.sequence_forward(batch[RETURNS_TO_GO], batch[SB.OBS], actions_in, batch[TIMESTEPS], mask)
    if model.discrete:
        n = preds["actions"].shape[-1]
        per_step = torch.nn.functional.cross_entropy(preds["actions"].reshape(-1, n), actions.reshape(-1).long(),
                                                     reduction="none").reshape(mask.shape)
    else:
        per_step = ((preds["actions"] - actions_in) ** 2).mean(-1)
    action_loss = _masked_mean(per_step, mask)
    total = cfg["loss_coef_actions"] * action_loss
    stats: Dict[str, torch.Tensor] = {"action_loss": action_loss.detach()}
    pairs = mask[:, :-1] * mask[:, 1:]  # step t and t + 1 both real
    if cfg["loss_coef_obs"] > 0:
        obs_loss = _masked_mean(((preds["obs"][:, :-1] - batch[SB.OBS][:, 1:]) ** 2).mean(-1), pairs)
        total = total + cfg["loss_coef_obs"] * obs_loss
        stats["obs_loss"] = obs_loss.detach()
    if cfg["loss_coef_returns_to_go"] > 0:
        scale = model.rtg_scale  # returns in the units the model reads them
        rtg_loss = _masked_mean((preds["returns_to_go"][:, :-1] - batch[RETURNS_TO_GO][:, 1:] / scale) ** 2, pairs)
        total = total + cfg["loss_coef_returns_to_go"] * rtg_loss
        stats["returns_to_go_loss"] = rtg_loss.detach()
    stats["total_loss"] = total.detach()
    return total, stats


def model_action_input(model: DTModel, actions: torch.Tensor) -> torch.Tensor:
    """Logged actions as the model reads them: Discrete one-hot, Box flat floats."""
    if model.discrete:
        return torch.nn.functional.one_hot(actions.long(), model.action_in_dim).float()
    return actions.float().reshape(*actions.shape[:2], -1)


class DTTorchPolicy(TorchPolicy):
    """Acts on its rolling context (a recurrent state: `[K, 3 + obs + action]` per row);
    learns from segment batches (`segments.SegmentBuffer.sample`) with `dt_loss`."""

    loss_columns = (SB.OBS, SB.ACTIONS, RETURNS_TO_GO, TIMESTEPS, ATTENTION_MASK)

    def make_model_and_action_dist(self) -> Tuple[Any, torch.nn.Module]:
        obs_space, act_space = self.observation_space, self.action_space
        if not isinstance(obs_space, gym.spaces.Box):
            raise ValueError(f"DT needs a Box observation space (after preprocessing); got {obs_space}")
        obs_dim = int(np.prod(obs_space.shape))
        if isinstance(act_space, gym.spaces.Discrete):
            n = int(act_space.n)
            return Categorical, DTModel(obs_dim, n, n, True, self.config)
        if isinstance(act_space, gym.spaces.Box):
            if not self.config.get("normalize_actions", True):
                raise ValueError("DT predicts Box actions with tanh in [-1, 1], which needs 'normalize_actions': True "
                                 "(the data's actions normalized to [-1, 1], as rlfleet's `output` writes them)")
            size = int(np.prod(act_space.shape))
            return Deterministic, DTModel(obs_dim, size, size, False, self.config)
        raise ValueError(f"DT supports Box and Discrete action spaces; got {act_space}")

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        # AdamW (decoupled weight decay), as the paper trains (its appendix B); the `optimizer`
        # key's entries (weight_decay, betas, eps, ...) are AdamW's, which are Adam's names.
        options = dict(self.config.get("optimizer") or {})
        check_adam_options(options)
        if "betas" in options:
            options["betas"] = tuple(options["betas"])
        return {DEFAULT_OPTIMIZER: torch.optim.AdamW(self.model.parameters(), lr=self.cur_lr, **options)}

    # --- acting ----------------------------------------------------------------------
    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs
                        ) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        """One step per row; `state_batches`: the rows' contexts (none: an episode's start),
        `prev_reward_batch`: the rewards of the rows' last steps (they lower the return-to-go)."""
        explore = self.config.get("explore", True) if explore is None else explore
        timestep = self.global_timestep if timestep is None else timestep
        self.model.eval()  # no dropout while acting
        obs = np.asarray(obs_batch, np.float32)
        actions, state_out, extra = act_torch(self, obs, state_batches, prev_action_batch, prev_reward_batch,
                                              explore, timestep)
        if self.model.discrete:  # the context holds the action taken (sampled when exploring)
            taken = torch.nn.functional.one_hot(torch.as_tensor(actions).long(), self.model.action_in_dim)
            state_out = [self.model.with_last_action(torch.as_tensor(state_out[0]), taken).numpy()]
        return actions, state_out, extra

    # --- learning --------------------------------------------------------------------
    def loss(self, model, dist_class, train_batch):
        return dt_loss(self, model, dist_class, train_batch)

    def to_tensors(self, batch: SampleBatch) -> TensorBatch:
        """The segments' `[B, K, ...]` columns as tensors (no recurrent sequencing: each row
        is already a segment)."""
        return TensorBatch({c: as_tensor(np.asarray(batch[c])).to(self.device) for c in self.loss_columns})

    def learn_on_batch(self, samples: SampleBatch) -> Dict[str, Any]:
        """One AdamW step on a batch of segments, the learning rate warmed up linearly over
        the first `warmup_steps` updates (the paper's schedule)."""
        warmup = int(self.config["warmup_steps"])
        factor = min(1.0, (self.num_grad_updates + 1) / warmup) if warmup > 0 else 1.0
        for group in self.optimizers[DEFAULT_OPTIMIZER].param_groups:
            group["lr"] = self.cur_lr * factor
        result = super().learn_on_batch(samples)
        result["learner_stats"]["warmup_lr"] = self.cur_lr * factor
        return result

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        """Nothing per trajectory: returns-to-go need whole episodes (segments.py)."""
        return sample_batch

    def export_model(self, export_dir: str, onnx: Optional[int] = None, **kwargs: Any) -> str:
        """The acting step (policy/export.py, recurrent): `obs`, `prev_rewards`, `state_in_0`
        (the context; zeros at an episode's start) in; `actions`, `dist_inputs`,
        `state_out_0` out. The configured `target_return` is part of the graph."""
        self.model.eval()
        return super().export_model(export_dir, onnx, **kwargs)
