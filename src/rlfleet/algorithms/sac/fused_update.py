"""SAC's update (continuous actions) written out in NumPy: the three losses' gradients by
hand, then the three Adam steps, on NumPy views of the torch parameters.

Why: at SAC's usual sizes ([256, 256] nets, 256 rows) a torch update spends a third or more
of its time in per-op dispatch and autograd bookkeeping; the arithmetic, done here with one
matrix product per layer and direction, is what is left (issue 16).

It computes what `sac_losses` and `TorchPolicy._step` compute: the reparameterised draw from
the squashed Gaussian (the same noise, drawn from the policy's torch generator in the same
order), log-std clamping, the twin-Q minimum (torch's rule for ties: half the gradient to
each), the critic loss with replay weights and n-step discounts, the actor loss through the
frozen Q-nets, the alpha loss, per-network gradient clipping, the NaN guard, and each
optimizer's `Adam` step on its own flat moment buffers (`rlfleet.policy.numpy_learner`).
`tests/test_fused_sac.py` checks weights, optimizer states, stats and TD errors against the
torch path.

`SACTorchPolicy.learn_on_batch` uses it where exact (`unsupported_reason`): the policy is
`SACTorchPolicy` itself with Box actions, its nets Linear layers with tanh, ReLU or no
activation, float32 on the CPU, no towers, rlfleet `Adam`s without weight decay, AMSGrad or
`maximize`, and `_deterministic_loss` off; and only while torch runs on one thread (with more,
torch's multi-threaded products are as fast or faster). Everything else keeps the torch
path, as does `fast_path: "off"` (policy/fast_plan.py).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch

from rlfleet.algorithms.off_policy_common import replay_columns
from rlfleet.algorithms.sac.sac_model import SACModel
from rlfleet.fast.distributions import gaussian_log_density, tanh_log_det, tanh_log_det_grad
from rlfleet.fast.mlp import backward, forward
from rlfleet.policy.numpy_learner import FlatAdam, FusedUpdate, clip_guard_and_step, module_layers, nets_reason
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.spaces import policy_action_bounds

SB = SampleBatch
_LOG_STD_MIN, _LOG_STD_MAX = -20.0, 2.0  # SquashedGaussian's clamp
_NAMES = ("critic", "actor", "alpha")


def unsupported_reason(policy) -> Optional[str]:
    """Why the fused update cannot stand in for the torch one on `policy` (None: it can)."""
    from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy

    if type(policy) is not SACTorchPolicy:
        return f"the policy class is {type(policy).__name__}, not SACTorchPolicy"
    model = policy.model
    if type(model) is not SACModel or model.discrete:
        return "discrete actions or another model"
    if policy.config["_deterministic_loss"]:
        return "_deterministic_loss"
    nets = [model.policy_net, model.q_net, model.target_q_net]
    if model.twin_q_net is not None:
        nets += [model.twin_q_net, model.target_twin_q_net]
    return nets_reason(policy, nets, {"critic": model.q_parameters(), "actor": model.policy_parameters(),
                                      "alpha": [model.log_alpha]})


class FusedSACUpdate(FusedUpdate):
    """The fused update for one policy (check `unsupported_reason` first). Views are
    rebuilt at each call, so loaded weights and optimizer states are the ones trained."""

    def __init__(self, policy):
        super().__init__(policy)
        low, high = policy_action_bounds(policy.action_space, policy.config["normalize_actions"])
        self.low = np.asarray(low, np.float32)
        self.high = np.asarray(high, np.float32)
        self.log_half_range = np.log((self.high - self.low) / np.float32(2.0))

    def _bind(self) -> None:
        policy, model = self.policy, self.policy.model
        self.adams = {name: FlatAdam(policy.optimizers[name]) for name in _NAMES}
        critic_views = self.adams["critic"].grad_views
        self.pi = module_layers(model.policy_net, self.adams["actor"].grad_views)
        self.q = [module_layers(model.q_net, critic_views)]
        self.target_q = [module_layers(model.target_q_net)[0]]
        if model.twin_q_net is not None:
            self.q.append(module_layers(model.twin_q_net, critic_views))
            self.target_q.append(module_layers(model.target_twin_q_net)[0])
        self.log_alpha = model.log_alpha.detach().numpy()
        self.alpha_grad = self.adams["alpha"].grad_views[id(model.log_alpha)]

    def _policy_draw(self, obs: np.ndarray, noise: np.ndarray):
        """The policy's outputs on `obs` and one reparameterised draw with `noise`: `(layer
        outputs, raw log-std, mean, std, u, tanh(u), action, (u - mean) / std, logp)`."""
        outs = forward(self.pi[0], obs)
        k = noise.shape[1]
        mean, raw_log_std = outs[-1][:, :k], outs[-1][:, k:]
        log_std = np.clip(raw_log_std, _LOG_STD_MIN, _LOG_STD_MAX)
        std = np.exp(log_std)
        u = mean + std * noise
        tanh_u = np.tanh(u)
        action = self.low + (tanh_u + 1.0) * 0.5 * (self.high - self.low)
        z = (u - mean) / std
        log_det = tanh_log_det(u, self.log_half_range)
        return outs, raw_log_std, mean, std, u, tanh_u, action, z, gaussian_log_density(z, log_std) - log_det.sum(1)

    def _update(self, cols: Dict[str, np.ndarray]) -> Dict[str, Any]:
        policy = self.policy
        cfg = policy.config
        f32 = np.float32
        obs, next_obs, actions, rewards, discounts, weights = replay_columns(cols, cfg["gamma"])
        n = len(rewards)
        log_alpha = f32(self.log_alpha)
        alpha = np.exp(log_alpha)
        k = actions.shape[1]
        gen = policy.generator
        # The noise in the torch path's order: the draw at s, then the one at s'.
        noise_t = torch.randn((n, k), generator=gen, dtype=torch.float32).numpy()
        noise_tp1 = torch.randn((n, k), generator=gen, dtype=torch.float32).numpy()

        pi_outs, raw_log_std, mean, std, u, tanh_u, a_t, z, logp_t = self._policy_draw(obs, noise_t)
        *_, a_tp1, _, logp_tp1 = self._policy_draw(next_obs, noise_tp1)
        q_in = np.concatenate([obs, actions], axis=1)
        q_outs = [forward(layers, q_in) for layers, _ in self.q]
        q_values = [outs[-1][:, 0] for outs in q_outs]
        next_in = np.concatenate([next_obs, a_tp1], axis=1)
        q_tp1 = forward(self.target_q[0], next_in)[-1][:, 0]
        if len(self.target_q) > 1:
            q_tp1 = np.minimum(q_tp1, forward(self.target_q[1], next_in)[-1][:, 0])
        target = rewards + discounts * (q_tp1 - alpha * logp_tp1)
        pi_in = np.concatenate([obs, a_t], axis=1)
        pi_q_outs = [forward(layers, pi_in) for layers, _ in self.q]
        pi_qs = [outs[-1][:, 0] for outs in pi_q_outs]
        q_pi = pi_qs[0] if len(pi_qs) == 1 else np.minimum(pi_qs[0], pi_qs[1])

        inv = f32(1.0 / n)
        tds = [q - target for q in q_values]
        critic_loss = sum(float((0.5 * (weights * td * td)).mean()) for td in tds)
        td_error = np.abs(tds[0]) if len(tds) == 1 else 0.5 * (np.abs(tds[0]) + np.abs(tds[1]))
        actor_loss = float((alpha * logp_t - q_pi).mean())
        te = policy.target_entropy
        alpha_loss = float(-(log_alpha * (logp_t + f32(te))).mean())
        q_t = q_values[0]
        stats: Dict[str, Any] = {
            "critic_loss": critic_loss, "actor_loss": actor_loss, "alpha_loss": alpha_loss,
            "alpha_value": float(alpha), "target_entropy": float(te),
            "policy_entropy": float(-logp_t.mean()), "mean_q": float(q_t.mean()), "max_q": float(q_t.max()),
            "min_q": float(q_t.min()), "mean_td_error": float(td_error.mean()), "td_error": td_error,
        }

        adams = self.adams
        for adam in adams.values():
            adam.grad.fill(0.0)
        # Critic: 0.5 * mean(w * td^2) per Q-net.
        for (layers, grads), outs, td in zip(self.q, q_outs, tds):
            backward(layers, grads, outs, (weights * td * inv)[:, None], False)
        # Actor: mean(alpha * logp - min Q(s, a~)), through the frozen Q-nets into a~.
        g_q = -inv
        if len(pi_qs) == 1:
            shares = [np.full(n, g_q, f32)]
        else:
            to_first = np.where(pi_qs[0] < pi_qs[1], 1.0, np.where(pi_qs[0] == pi_qs[1], 0.5, 0.0)).astype(f32)
            shares = [g_q * to_first, g_q * (1.0 - to_first)]
        g_action = 0.0
        for (layers, _), outs, share in zip(self.q, pi_q_outs, shares):
            g_action = g_action + backward(layers, None, outs, share[:, None], True)[:, obs.shape[1]:]
        g_logp = (alpha * inv).astype(f32)
        dlogp_du = -z / std + tanh_log_det_grad(u)
        g_u = g_logp * dlogp_du + g_action * ((1.0 - tanh_u * tanh_u) * (0.5 * (self.high - self.low)))
        g_mean = g_u + g_logp * (z / std)
        g_log_std = g_u * (std * noise_t) + g_logp * (z * z - 1.0)
        g_log_std = g_log_std * ((raw_log_std >= _LOG_STD_MIN) & (raw_log_std <= _LOG_STD_MAX))
        backward(self.pi[0], self.pi[1], pi_outs, np.concatenate([g_mean, g_log_std], axis=1), False)
        # Alpha: -mean(log_alpha * (logp + target_entropy)), logp held fixed.
        self.alpha_grad[...] = -(logp_t + f32(te)).mean()

        clip_guard_and_step(policy, adams, {"critic": critic_loss, "actor": actor_loss, "alpha": alpha_loss}, stats)
        # As the torch path reports it: the parameter's value once the step is taken.
        stats["log_alpha_value"] = float(self.log_alpha)
        return stats


__all__ = ["FusedSACUpdate", "unsupported_reason"]
