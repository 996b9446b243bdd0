"""SAC's losses (continuous actions) and their gradients in NumPy: `sac_losses` with the
reparameterised draw from the squashed Gaussian (the caller's noise), log-std clamping, the
twin-Q minimum (torch's rule for ties: half the gradient to each), the critic loss with
replay weights and n-step discounts, the actor loss through the frozen Q-nets and the alpha
loss. Returns the stats and writes the gradients; clipping and stepping are the learning
loop's (policy/learning_loop.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

import numpy as np

from rlfleet.fast.distributions import gaussian_log_density, tanh_log_det, tanh_log_det_grad
from rlfleet.fast.lanes import SERIAL, Lanes
from rlfleet.fast.mlp import backward, forward

_LOG_STD_MIN, _LOG_STD_MAX = -20.0, 2.0  # SquashedGaussian's clamp


@dataclass
class SACNets:
    """NumPy views: the policy net `pi` and each Q-net of `q` as `(layers, grads)`, the target
    Q-nets' layers, `log_alpha` and its gradient view, and the action bounds."""

    pi: tuple
    q: List[tuple]
    target_q: List[list]
    log_alpha: np.ndarray
    alpha_grad: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def __post_init__(self):
        self.log_half_range = np.log((self.high - self.low) / np.float32(2.0))


def policy_draw(nets: "SACNets", obs: np.ndarray, noise: np.ndarray):
    """The policy's outputs on `obs` and one reparameterised draw with `noise`: `(layer
    outputs, raw log-std, mean, std, u, tanh(u), action, (u - mean) / std, logp)`."""
    outs = forward(nets.pi[0], obs)
    k = noise.shape[1]
    mean, raw_log_std = outs[-1][:, :k], outs[-1][:, k:]
    log_std = np.clip(raw_log_std, _LOG_STD_MIN, _LOG_STD_MAX)
    std = np.exp(log_std)
    u = mean + std * noise
    tanh_u = np.tanh(u)
    action = nets.low + (tanh_u + 1.0) * 0.5 * (nets.high - nets.low)
    z = (u - mean) / std
    log_det = tanh_log_det(u, nets.log_half_range)
    return outs, raw_log_std, mean, std, u, tanh_u, action, z, gaussian_log_density(z, log_std) - log_det.sum(1)


def sac_gradients(nets: SACNets, obs, next_obs, actions, rewards, discounts, weights, target_entropy: float,
                  noise_t: np.ndarray, noise_tp1: np.ndarray, lanes: Lanes = SERIAL) -> Dict[str, Any]:
    """The stats (with the per-sample `"td_error"`) of one update; writes the critic, actor and
    alpha gradients into their views (zeroed by the caller). `noise_t` / `noise_tp1`: standard
    normal `[B, action dim]` for the draws at s and s'. `lanes`: the draws at s and s', and
    each twin Q-net's passes, run side by side when parallel (the same results either way)."""
    f32 = np.float32
    n = len(rewards)
    log_alpha = f32(nets.log_alpha)
    alpha = np.exp(log_alpha)
    draw_t, draw_tp1 = lanes.pair(lambda: policy_draw(nets, obs, noise_t), lambda: policy_draw(nets, next_obs, noise_tp1))
    pi_outs, raw_log_std, mean, std, u, tanh_u, a_t, z, logp_t = draw_t
    *_, a_tp1, _, logp_tp1 = draw_tp1
    q_in = np.concatenate([obs, actions], axis=1)
    next_in = np.concatenate([next_obs, a_tp1], axis=1)
    pi_in = np.concatenate([obs, a_t], axis=1)

    def q_passes(i: int):
        """Q-net i on (s, a) and on (s, a~), and its target on (s', a')."""
        layers = nets.q[i][0]
        return forward(layers, q_in), forward(nets.target_q[i], next_in)[-1][:, 0], forward(layers, pi_in)

    passes = list(lanes.pair(lambda: q_passes(0), lambda: q_passes(1))) if len(nets.q) > 1 else [q_passes(0)]
    q_outs = [p[0] for p in passes]
    q_values = [outs[-1][:, 0] for outs in q_outs]
    q_tp1 = passes[0][1]
    if len(passes) > 1:
        q_tp1 = np.minimum(q_tp1, passes[1][1])
    target = rewards + discounts * (q_tp1 - alpha * logp_tp1)
    pi_q_outs = [p[2] for p in passes]
    pi_qs = [outs[-1][:, 0] for outs in pi_q_outs]
    q_pi = pi_qs[0] if len(pi_qs) == 1 else np.minimum(pi_qs[0], pi_qs[1])

    inv = f32(1.0 / n)
    tds = [q - target for q in q_values]
    critic_loss = sum(float((0.5 * (weights * td * td)).mean()) for td in tds)
    td_error = np.abs(tds[0]) if len(tds) == 1 else 0.5 * (np.abs(tds[0]) + np.abs(tds[1]))
    actor_loss = float((alpha * logp_t - q_pi).mean())
    te = target_entropy
    alpha_loss = float(-(log_alpha * (logp_t + f32(te))).mean())
    q_t = q_values[0]
    stats: Dict[str, Any] = {
        "critic_loss": critic_loss, "actor_loss": actor_loss, "alpha_loss": alpha_loss,
        "alpha_value": float(alpha), "target_entropy": float(te),
        "policy_entropy": float(-logp_t.mean()), "mean_q": float(q_t.mean()), "max_q": float(q_t.max()),
        "min_q": float(q_t.min()), "mean_td_error": float(td_error.mean()), "td_error": td_error,
    }

    # Actor: mean(alpha * logp - min Q(s, a~)), through the frozen Q-nets into a~.
    g_q = -inv
    if len(pi_qs) == 1:
        shares = [np.full(n, g_q, f32)]
    else:
        to_first = np.where(pi_qs[0] < pi_qs[1], 1.0, np.where(pi_qs[0] == pi_qs[1], 0.5, 0.0)).astype(f32)
        shares = [g_q * to_first, g_q * (1.0 - to_first)]

    def q_backward(i: int) -> np.ndarray:
        """Q-net i's critic gradient (0.5 * mean(w * td^2)), and the actor loss's gradient
        with respect to a~ through it."""
        layers, grads = nets.q[i]
        backward(layers, grads, q_outs[i], (weights * tds[i] * inv)[:, None], False)
        return backward(layers, None, pi_q_outs[i], shares[i][:, None], True)[:, obs.shape[1]:]

    g_actions = lanes.pair(lambda: q_backward(0), lambda: q_backward(1)) if len(nets.q) > 1 else [q_backward(0)]
    g_action = 0.0
    for g in g_actions:
        g_action = g_action + g
    g_logp = (alpha * inv).astype(f32)
    dlogp_du = -z / std + tanh_log_det_grad(u)
    g_u = g_logp * dlogp_du + g_action * ((1.0 - tanh_u * tanh_u) * (0.5 * (nets.high - nets.low)))
    g_mean = g_u + g_logp * (z / std)
    g_log_std = g_u * (std * noise_t) + g_logp * (z * z - 1.0)
    g_log_std = g_log_std * ((raw_log_std >= _LOG_STD_MIN) & (raw_log_std <= _LOG_STD_MAX))
    backward(nets.pi[0], nets.pi[1], pi_outs, np.concatenate([g_mean, g_log_std], axis=1), False)
    # Alpha: -mean(log_alpha * (logp + target_entropy)), logp held fixed.
    nets.alpha_grad[...] = -(logp_t + f32(te)).mean()
    return stats


__all__ = ["SACNets", "policy_draw", "sac_gradients"]
