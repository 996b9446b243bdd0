"""DDPG / TD3's losses and their gradients in NumPy: `ddpg_losses` (target policy smoothing
with the caller's noise, clipped double Q, squared or Huber error with replay weights and
n-step discounts, the L2 penalty on weight matrices, the actor loss through the frozen first
critic). Returns the stats and writes the gradients; clipping and stepping (and TD3's delayed
actor steps) are the learning loop's (policy/learning_loop.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from rlfleet.fast.lanes import SERIAL, Lanes
from rlfleet.fast.mlp import backward, forward


@dataclass
class DDPGNets:
    """NumPy views: `actor` / each of `critics` as `(layers, grads)`, the targets' layers,
    and the action bounds (`bounded`: tanh onto [low, high])."""

    actor: tuple
    target_actor: list
    critics: List[tuple]
    target_critics: List[list]
    bounded: bool
    low: np.ndarray
    high: np.ndarray

    def act(self, layers, obs: np.ndarray):
        """`(layer outputs, actions)` of an actor: tanh onto the bounds when they are finite."""
        outs = forward(layers, obs)
        if not self.bounded:
            return outs, outs[-1]
        return outs, self.low + (np.tanh(outs[-1]) + 1.0) * 0.5 * (self.high - self.low)


@dataclass
class DDPGSettings:
    smooth_target_policy: bool
    target_noise: float
    target_noise_clip: float
    use_huber: bool
    huber_threshold: float
    l2_reg: float


def ddpg_gradients(nets: DDPGNets, obs, next_obs, actions, rewards, discounts, weights, s: DDPGSettings,
                   noise: Optional[np.ndarray], update_actor: bool, lanes: Lanes = SERIAL) -> Dict[str, Any]:
    """The stats (with the per-sample `"td_error"`) of one update; writes the critics'
    gradients, and the actor's when `update_actor`, into their views (zeroed by the caller).
    `noise`: standard normal `[B, action dim]` for target policy smoothing. `lanes`: the
    actors' passes, and each twin critic's, run side by side when parallel (the same results
    either way)."""
    f32 = np.float32
    n = len(rewards)
    twin = len(nets.critics) > 1

    def pair(first, second):
        return lanes.pair(first, second) if twin else (first(), second())

    (_, a_tp1), (actor_outs, a_det) = pair(lambda: nets.act(nets.target_actor, next_obs),
                                          lambda: nets.act(nets.actor[0], obs))
    if s.smooth_target_policy:
        clip = f32(s.target_noise_clip)
        a_tp1 = np.maximum(np.minimum(a_tp1 + np.clip(noise * f32(s.target_noise), -clip, clip), nets.high), nets.low)
    next_in = np.concatenate([next_obs, a_tp1], axis=1)
    q_in = np.concatenate([obs, actions], axis=1)
    det_in = np.concatenate([obs, a_det], axis=1)

    def critic_passes(i: int):
        """Critic i on (s, a), its target on (s', a'); the first critic also on (s, mu(s))."""
        layers = nets.critics[i][0]
        det = forward(layers, det_in) if i == 0 else None
        return forward(layers, q_in), forward(nets.target_critics[i], next_in)[-1][:, 0], det

    passes = list(pair(lambda: critic_passes(0), lambda: critic_passes(1))) if twin else [critic_passes(0)]
    q_tp1 = passes[0][1]
    if twin:
        q_tp1 = np.minimum(q_tp1, passes[1][1])
    target = rewards + discounts * q_tp1

    critic_outs = [p[0] for p in passes]
    tds = [outs[-1][:, 0] - target for outs in critic_outs]
    if s.use_huber:
        delta = f32(s.huber_threshold)
        errors = [np.where(np.abs(td) <= delta, 0.5 * td * td, delta * (np.abs(td) - 0.5 * delta)) for td in tds]
        d_errors = [np.clip(td, -delta, delta) for td in tds]
    else:
        errors = [0.5 * td * td for td in tds]
        d_errors = tds
    critic_loss = float((weights * sum(errors)).mean())
    det_outs = passes[0][2]
    actor_loss = -float(det_outs[-1][:, 0].mean())
    l2 = s.l2_reg
    if l2:
        critic_loss += l2 * sum(0.5 * float(np.sum(w * w)) for layers, _ in nets.critics for w, _, _ in layers)
        actor_loss += l2 * sum(0.5 * float(np.sum(w * w)) for w, _, _ in nets.actor[0])
    q_t, td = critic_outs[0][-1][:, 0], tds[0]
    stats: Dict[str, Any] = {
        "critic_loss": critic_loss, "actor_loss": actor_loss, "mean_q": float(q_t.mean()),
        "max_q": float(q_t.max()), "min_q": float(q_t.min()), "mean_td_error": float(np.abs(td).mean()),
        "td_error": td,
    }

    inv = f32(1.0 / n)

    def critic_backward(i: int) -> None:
        layers, grads = nets.critics[i]
        backward(layers, grads, critic_outs[i], (weights * d_errors[i] * inv)[:, None], False)
        if l2:
            for (w, _, _), (gw, _) in zip(layers, grads):
                gw += f32(l2) * w

    def actor_backward() -> None:
        # -mean(Q_1(s, mu(s))) through the frozen critic into the action, then the actor.
        g_action = backward(nets.critics[0][0], None, det_outs, np.full((n, 1), -inv, f32), True)[:, obs.shape[1]:]
        g_out = g_action
        if nets.bounded:
            tanh_out = np.tanh(actor_outs[-1])
            g_out = g_action * ((1.0 - tanh_out * tanh_out) * (0.5 * (nets.high - nets.low)))
        layers, grads = nets.actor
        backward(layers, grads, actor_outs, g_out, False)
        if l2:
            for (w, _, _), (gw, _) in zip(layers, grads):
                gw += f32(l2) * w

    def first_lane() -> None:
        critic_backward(0)
        if update_actor:
            actor_backward()

    if twin:
        lanes.pair(first_lane, lambda: critic_backward(1))
    else:
        first_lane()
    return stats


__all__ = ["DDPGNets", "DDPGSettings", "ddpg_gradients"]
