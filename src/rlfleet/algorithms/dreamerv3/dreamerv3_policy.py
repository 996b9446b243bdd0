"""DreamerV3's policy: acts with the RSSM's filtered state (h, z, previous action carried from
step to step as the recurrent state), learns on replayed sequences (replay/sequences.py) with
three optimizers: the world model, the actor and the critic (`dreamerv3_loss`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from rlfleet.algorithms.dreamerv3.actor_critic import DreamerV3Model, actor_critic_losses, imagine
from rlfleet.algorithms.dreamerv3.losses import kl_losses, two_hot_loss
from rlfleet.algorithms.dreamerv3.world_model import check_observation_space
from rlfleet.models.target_network import soft_update
from rlfleet.policy.fast_plan import TORCH, FastPathPlan, fast_path_mode
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy, _obs_array

SB = SampleBatch
WORLD_MODEL, ACTOR, CRITIC = "world_model", "actor", "critic"
LOSS_COLUMNS = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.TERMINATEDS, SB.SEQ_LENS)

LEARNER_REASON = ("DreamerV3 learns with torch: its world model (a GRU over straight-through sampled "
                  "categorical latents) and the imagined rollouts need autograd through recurrent dynamics, "
                  "which the NumPy learner (feed-forward losses only) does not restate")
ACTOR_REASON = "DreamerV3 acts through its RSSM (GRU and categorical latents), which the NumPy snapshot cannot run"


def world_model_loss(model: DreamerV3Model, batch: Dict[str, torch.Tensor], cfg: dict, generator=None
                     ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """The world model's loss on `[B, L + 1]` replayed observations (paper eq. 3-5).

    Step t filters observation t given action t - 1 (zeros at t = 0); steps t >= 1 also
    predict reward t - 1 (two-hot, symlog) and whether the episode continued (1 - terminated
    t - 1). Loss: prediction (decoder MSE + reward + continue) + `kl_dyn_scale` * dynamics +
    `kl_rep_scale` * representation, both KL terms clipped below at `free_nats`; averaged over
    the rows of each sequence before its padding.

    Returns `(loss, posterior states {"h", "z"} [B, T], stats)`.
    """
    wm = model.world_model
    obs = batch[SB.OBS]
    b, t_obs = obs.shape[:2]
    length = t_obs - 1
    actions = model.actor.as_input(batch[SB.ACTIONS][:, :length])
    prev_actions = torch.cat([torch.zeros_like(actions[:, :1]), actions], 1)
    out = wm.observe(obs, prev_actions, generator)
    feat = torch.cat([out["h"], out["z"]], -1)
    steps = torch.arange(t_obs, device=obs.device)[None, :]
    valid = (steps <= batch[SB.SEQ_LENS][:, None].long()).float()
    recon = wm.decoder(feat.reshape(b * t_obs, -1)).reshape(obs.shape)
    target = wm.decoder.target(obs, wm.encoder)
    recon_loss = ((recon - target) ** 2).reshape(b, t_obs, -1).sum(-1)
    after = valid[:, 1:]
    reward_loss = two_hot_loss(wm.reward(feat[:, 1:]), batch[SB.REWARDS][:, :length].float())
    cont_target = 1.0 - batch[SB.TERMINATEDS][:, :length].float()
    cont_loss = torch.nn.functional.binary_cross_entropy_with_logits(
        wm.cont(feat[:, 1:]).squeeze(-1), cont_target, reduction="none")
    dyn, rep, kl = kl_losses(out["post"], out["prior"], cfg["free_nats"])
    n = valid.sum().clamp(min=1.0)
    parts = {"recon_loss": (recon_loss * valid).sum() / n, "reward_loss": (reward_loss * after).sum() / n,
             "continue_loss": (cont_loss * after).sum() / n, "dyn_loss": (dyn * valid).sum() / n,
             "rep_loss": (rep * valid).sum() / n}
    loss = (parts["recon_loss"] + parts["reward_loss"] + parts["continue_loss"]
            + cfg["kl_dyn_scale"] * parts["dyn_loss"] + cfg["kl_rep_scale"] * parts["rep_loss"])
    stats = {k: v.detach() for k, v in parts.items()}
    stats.update(world_model_loss=loss.detach(), kl=(kl * valid).sum() / n)
    mask = valid.bool()
    return loss, {"h": out["h"][mask].detach(), "z": out["z"][mask].detach()}, stats


def dreamerv3_loss(policy: "DreamerV3TorchPolicy", model: DreamerV3Model, dist_class, batch: Dict[str, torch.Tensor]
                   ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """`({"world_model", "actor", "critic": loss}, stats)` on replayed sequences: the world
    model's loss, then the actor-critic's on `imagination_horizon` steps imagined from every
    posterior state of the batch."""
    cfg = policy.config
    wm_loss, starts, stats = world_model_loss(model, batch, cfg, policy.generator)
    imagined = imagine(model, starts["h"], starts["z"], cfg["imagination_horizon"], policy.generator)
    actor_loss, critic_loss, ac_stats = actor_critic_losses(model, imagined, cfg)
    stats.update(ac_stats)
    # Replay priorities do not apply (prioritized_replay is refused): zeros keep the loop's contract.
    stats["td_error"] = torch.zeros(batch[SB.OBS].shape[0])
    return {WORLD_MODEL: wm_loss, ACTOR: actor_loss, CRITIC: critic_loss}, stats


class DreamerV3TorchPolicy(TorchPolicy):
    """Acts with the RSSM (recurrent state: h, z, previous action), learns with `dreamerv3_loss`."""

    loss_columns = LOSS_COLUMNS

    def __init__(self, observation_space, action_space, config, **kwargs):
        check_observation_space(observation_space)
        super().__init__(observation_space, action_space, config, **kwargs)
        # The sequences replayed are `batch_length` steps long; the RSSM needs no view columns.
        self.max_seq_len = int(config["batch_length"])
        self.view_columns = []

    def make_model_and_action_dist(self):
        return None, DreamerV3Model(self.observation_space, self.action_space, self.config)

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        cfg, m = self.config, self.model
        eps = cfg["adam_epsilon"]
        return {WORLD_MODEL: self.make_adam(m.world_model.parameters(), lr=cfg["world_model_lr"], eps=eps),
                ACTOR: self.make_adam(m.actor.parameters(), lr=cfg["actor_lr"], eps=eps),
                CRITIC: self.make_adam(m.critic.parameters(), lr=cfg["critic_lr"], eps=eps)}

    @property
    def fast_plan(self) -> FastPathPlan:
        mode = fast_path_mode(self.config)
        if mode == "require":
            raise ValueError(f"fast_path='require', but the NumPy learner cannot serve {type(self).__name__} "
                             f"{self.policy_id!r}: {LEARNER_REASON}; set fast_path to 'auto'")
        if mode == "off":  # said as every other policy says it
            return FastPathPlan(TORCH, "fast_path is 'off'", TORCH, "fast_path is 'off'")
        return FastPathPlan(TORCH, ACTOR_REASON, TORCH, LEARNER_REASON)

    def numpy_actor_reason(self) -> Optional[str]:
        return ACTOR_REASON

    # --- acting --------------------------------------------------------------------
    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs
                        ) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        explore = self.config.get("explore", True) if explore is None else explore
        obs = torch.as_tensor(_obs_array(obs_batch), device=self.device)
        if not state_batches:
            state_batches = [np.repeat(s[None], len(obs), 0) for s in self.get_initial_state()]
        h, z, prev = (torch.as_tensor(np.asarray(s), dtype=torch.float32, device=self.device)
                      for s in state_batches)
        with torch.inference_mode():
            action, h, z, prev = self.model.act(obs, h, z, prev, self.generator, greedy=not explore)
        return action.cpu().numpy(), [h.cpu().numpy(), z.cpu().numpy(), prev.cpu().numpy()], {}

    # --- learning ------------------------------------------------------------------
    def to_tensors(self, batch: SampleBatch) -> Dict[str, torch.Tensor]:
        """The replayed sequences' columns as tensors, as stored (replay/sequences.py)."""
        missing = [c for c in self.loss_columns if c not in batch]
        if missing:
            raise ValueError(f"DreamerV3 learns on replayed sequences and needs the columns {missing}; "
                             f"got {sorted(batch.keys())}")
        return {c: torch.as_tensor(np.asarray(batch[c]), device=self.device) for c in self.loss_columns}

    def loss(self, model, dist_class, train_batch):
        return dreamerv3_loss(self, model, dist_class, train_batch)

    def update_target(self, tau: Optional[float] = None) -> None:
        """The slow critic follows the critic: slow <- tau * critic + (1 - tau) * slow."""
        soft_update(self.model.slow_critic, self.model.critic, self.config["tau"] if tau is None else tau)

    # --- export --------------------------------------------------------------------
    def export_model(self, export_dir: str, onnx: Optional[int] = None, **kwargs: Any) -> str:
        """TorchScript (or ONNX with opset `onnx`) of one greedy acting step:
        `(obs, h, z, prev_action) -> (action, h, z, prev_action)`; see export.py here."""
        from rlfleet.algorithms.dreamerv3.export import export_acting_step

        return export_acting_step(self, export_dir, onnx, **kwargs)


__all__ = ["DreamerV3TorchPolicy", "dreamerv3_loss", "world_model_loss"]
