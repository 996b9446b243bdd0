"""DDPG / TD3's update written out in NumPy: the critic and actor losses' gradients by hand,
then the Adam steps of the optimizers `optimizers_to_step` names, on NumPy views of the
torch parameters (`rlfleet.policy.numpy_learner`; why: see there and issue 16).

It computes what `ddpg_losses` and `TorchPolicy._step` compute: target policy smoothing
(the same noise, from the policy's torch generator), clipped double Q, squared or Huber
error with replay weights and n-step discounts, the L2 penalty on weight matrices, the actor
loss through the frozen first critic, TD3's delayed actor steps, per-network gradient
clipping and the NaN guard. `tests/test_fused_ddpg.py` checks weights, optimizer states,
stats and TD errors against the torch path.

`DDPGTorchPolicy.learn_on_batch` (DDPG, TD3, APEX-DDPG) uses it where exact
(`unsupported_reason`): the policy is `DDPGTorchPolicy` itself, its nets Linear layers with
tanh, ReLU or no activation, float32 on the CPU, no towers, rlfleet `Adam`s without weight
decay, AMSGrad or `maximize`; and, as SAC's, only while torch runs on one thread.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch

from rlfleet.algorithms.ddpg.ddpg_model import DDPGModel
from rlfleet.algorithms.off_policy_common import replay_columns
from rlfleet.fast.mlp import backward, forward
from rlfleet.policy.numpy_learner import FlatAdam, FusedUpdate, clip_guard_and_step, module_layers, nets_reason
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
_NAMES = ("critic", "actor")


def unsupported_reason(policy) -> Optional[str]:
    """Why the fused update cannot stand in for the torch one on `policy` (None: it can)."""
    from rlfleet.algorithms.ddpg.ddpg_policy import DDPGTorchPolicy

    if type(policy) is not DDPGTorchPolicy:
        return f"the policy class is {type(policy).__name__}, not DDPGTorchPolicy"
    model = policy.model
    if type(model) is not DDPGModel:
        return "another model"
    nets = [model.actor, model.critic, model.target_actor, model.target_critic]
    if model.twin_critic is not None:
        nets += [model.twin_critic, model.target_twin_critic]
    return nets_reason(policy, nets, {"critic": model.critic_parameters(), "actor": model.actor_parameters()})


class FusedDDPGUpdate(FusedUpdate):
    """The fused update for one policy (check `unsupported_reason` first). Views are
    rebuilt at each call, so loaded weights and optimizer states are the ones trained."""

    def _bind(self) -> None:
        policy, model = self.policy, self.policy.model
        self.adams = {name: FlatAdam(policy.optimizers[name]) for name in _NAMES}
        critic_views = self.adams["critic"].grad_views
        self.actor = module_layers(model.actor, self.adams["actor"].grad_views)
        self.target_actor = module_layers(model.target_actor)[0]
        self.critics = [module_layers(model.critic, critic_views)]
        self.target_critics = [module_layers(model.target_critic)[0]]
        if model.twin_critic is not None:
            self.critics.append(module_layers(model.twin_critic, critic_views))
            self.target_critics.append(module_layers(model.target_twin_critic)[0])
        self.bounded = model.bounded
        self.low = model.low.numpy()
        self.high = model.high.numpy()

    def _act(self, layers, obs: np.ndarray):
        """`(layer outputs, actions)` of an actor: tanh onto the bounds when they are finite."""
        outs = forward(layers, obs)
        if not self.bounded:
            return outs, outs[-1]
        return outs, self.low + (np.tanh(outs[-1]) + 1.0) * 0.5 * (self.high - self.low)

    def _update(self, cols: Dict[str, np.ndarray]) -> Dict[str, Any]:
        policy = self.policy
        cfg = policy.config
        names = policy.optimizers_to_step()  # the critic; the actor every `policy_delay` updates
        f32 = np.float32
        obs, next_obs, actions, rewards, discounts, weights = replay_columns(cols, cfg["gamma"])
        n = len(rewards)

        _, a_tp1 = self._act(self.target_actor, next_obs)
        if cfg["smooth_target_policy"]:
            noise = torch.randn(a_tp1.shape, generator=policy.generator).numpy() * f32(cfg["target_noise"])
            clip = f32(cfg["target_noise_clip"])
            a_tp1 = np.maximum(np.minimum(a_tp1 + np.clip(noise, -clip, clip), self.high), self.low)
        next_in = np.concatenate([next_obs, a_tp1], axis=1)
        q_tp1 = forward(self.target_critics[0], next_in)[-1][:, 0]
        if len(self.target_critics) > 1:
            q_tp1 = np.minimum(q_tp1, forward(self.target_critics[1], next_in)[-1][:, 0])
        target = rewards + discounts * q_tp1

        q_in = np.concatenate([obs, actions], axis=1)
        critic_outs = [forward(layers, q_in) for layers, _ in self.critics]
        tds = [outs[-1][:, 0] - target for outs in critic_outs]
        if cfg["use_huber"]:
            delta = f32(cfg["huber_threshold"])
            errors = [np.where(np.abs(td) <= delta, 0.5 * td * td, delta * (np.abs(td) - 0.5 * delta)) for td in tds]
            d_errors = [np.clip(td, -delta, delta) for td in tds]
        else:
            errors = [0.5 * td * td for td in tds]
            d_errors = tds
        critic_loss = float((weights * sum(errors)).mean())
        actor_outs, a_det = self._act(self.actor[0], obs)
        det_in = np.concatenate([obs, a_det], axis=1)
        det_outs = forward(self.critics[0][0], det_in)
        actor_loss = -float(det_outs[-1][:, 0].mean())
        l2 = cfg["l2_reg"]
        if l2:
            critic_loss += l2 * sum(0.5 * float(np.sum(w * w)) for layers, _ in self.critics for w, _, _ in layers)
            actor_loss += l2 * sum(0.5 * float(np.sum(w * w)) for w, _, _ in self.actor[0])
        q_t, td = critic_outs[0][-1][:, 0], tds[0]
        stats: Dict[str, Any] = {
            "critic_loss": critic_loss, "actor_loss": actor_loss, "mean_q": float(q_t.mean()),
            "max_q": float(q_t.max()), "min_q": float(q_t.min()), "mean_td_error": float(np.abs(td).mean()),
            "td_error": td,
        }

        inv = f32(1.0 / n)
        adams = {name: self.adams[name] for name in names}
        for adam in adams.values():
            adam.grad.fill(0.0)
        for (layers, grads), outs, d_err in zip(self.critics, critic_outs, d_errors):
            backward(layers, grads, outs, (weights * d_err * inv)[:, None], False)
            if l2:
                for (w, _, _), (gw, _) in zip(layers, grads):
                    gw += f32(l2) * w
        if "actor" in adams:
            # -mean(Q_1(s, mu(s))) through the frozen critic into the action, then the actor.
            g_action = backward(self.critics[0][0], None, det_outs, np.full((n, 1), -inv, f32), True)[:, obs.shape[1]:]
            g_out = g_action
            if self.bounded:
                tanh_out = np.tanh(actor_outs[-1])
                g_out = g_action * ((1.0 - tanh_out * tanh_out) * (0.5 * (self.high - self.low)))
            layers, grads = self.actor
            backward(layers, grads, actor_outs, g_out, False)
            if l2:
                for (w, _, _), (gw, _) in zip(layers, grads):
                    gw += f32(l2) * w

        clip_guard_and_step(policy, adams, {"critic": critic_loss, "actor": actor_loss}, stats)
        return stats


__all__ = ["FusedDDPGUpdate", "unsupported_reason"]
