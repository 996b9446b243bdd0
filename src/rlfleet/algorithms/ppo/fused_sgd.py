"""PPO's minibatch SGD written out in NumPy: forward pass, the loss's gradient and Adam, fused.

Why: for the small fully connected nets PPO usually trains (two [64, 64] towers on a few
hundred rows), a torch update costs far more in per-op dispatch and autograd bookkeeping
(~80 ops of forward, backward, clipping and Adam: about 1 ms per minibatch here) than in
arithmetic. The same maths written out by hand takes a fraction of that (issue 16).

It computes what `ppo_surrogate_loss` and `TorchPolicy._step` compute: the clipped surrogate
(with torch's rule for ties in `min`: half the gradient to each side), the KL penalty, the
entropy bonus, the clipped value loss, global-norm gradient clipping, the NaN guard, and
`Adam`'s update on the optimizer's own flat moment buffers, so `get_state`, checkpoints and a
later torch update see the same optimizer state. Parameters are updated in place through
NumPy views of the torch tensors. `tests/test_fused_sgd.py` checks weights, optimizer state
and stats against the torch path.

`PPOTorchPolicy.multi_epoch_sgd` uses it only where it is exact (`unsupported_reason`): the
policy is `PPOTorchPolicy` itself; the model a `FullyConnectedNetwork` of Linear layers with
tanh, ReLU or no activation, without pixel scaling or memory; the distribution Categorical
(Discrete actions) or DiagGaussian (Box actions); float32 parameters on the CPU; one lean
`Adam` over all of the model's parameters, without weight decay, AMSGrad or `maximize`;
`use_critic`; no towers. Everything else keeps the torch path, as does `fast_path: "off"` (policy/fast_plan.py).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
from torch import nn

from rlfleet.models.distributions import Categorical, DiagGaussian
from rlfleet.models.fcnet import FullyConnectedNetwork
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.fast.distributions import (categorical_entropy_grad, categorical_entropy_kl, gaussian_entropy_kl,
                                        gaussian_kl_grads, gaussian_log_density, log_softmax, log_softmax_backward)
from rlfleet.fast.mlp import backward, forward, linear_stack
from rlfleet.policy.numpy_learner import FlatAdam, clip_guard_and_step, module_layers
from rlfleet.policy.learning_loop import finish_result, sgd_passes, start_result
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER

SB = SampleBatch


def unsupported_reason(policy) -> Optional[str]:
    """Why the fused update cannot stand in for the torch one on `policy` (None: it can)."""
    from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy

    if type(policy) is not PPOTorchPolicy:
        return f"the policy class is {type(policy).__name__}, not PPOTorchPolicy"
    model = policy.model
    if type(model) is not FullyConnectedNetwork or getattr(model, "pixels", None) is not None:
        return "the model is not a plain FullyConnectedNetwork"
    if not policy.config["use_critic"]:
        # The value net then gets no gradient, and Adam leaves parameters without one alone.
        return "use_critic is False"
    if policy.towers is not None or policy.device.type != "cpu" or policy.is_recurrent():
        return "towers, a GPU or a recurrent model"
    if policy.dist_class not in (Categorical, DiagGaussian):
        return f"the action distribution is {getattr(policy.dist_class, '__name__', policy.dist_class)}"
    if model.free_log_std and policy.dist_class is not DiagGaussian:
        return "free_log_std without Gaussian actions"
    for part in ("trunk", "logits", "value_head") + (() if model.value_trunk is None else ("value_trunk",)):
        if linear_stack(getattr(model, part)) is None:
            return f"model.{part} is not a stack of Linear + tanh/ReLU layers"
    if not isinstance(model.value_head, nn.Linear):
        return "the value head is not one Linear layer"
    if list(policy.optimizers) != [DEFAULT_OPTIMIZER]:
        return "more than one optimizer"
    return FlatAdam.supported(policy.optimizers[DEFAULT_OPTIMIZER], list(model.parameters()))


class FusedPPOSGD:
    """The fused update for one policy (check `unsupported_reason` first).

    Weight, gradient and moment views are rebuilt at each `multi_epoch_sgd` call, so weights
    loaded in between (`set_weights`, a restored checkpoint) are the ones trained.
    """

    def __init__(self, policy):
        self.policy = policy

    # --- layout ----------------------------------------------------------------------------
    def _bind(self) -> None:
        policy = self.policy
        model = policy.model
        self.adam = adam = FlatAdam(policy.optimizers[DEFAULT_OPTIMIZER])
        views = adam.grad_views
        self.pi_layers, self.pi_grads = module_layers(model.trunk, views)
        head, head_grads = module_layers(model.logits, views)
        self.pi_layers += head
        self.pi_grads += head_grads
        self.shared = model.value_trunk is None
        if self.shared:  # the value head reads the trunk's last hidden layer
            self.vf_layers, self.vf_grads = module_layers(model.value_head, views)
            self.trunk_len = len(linear_stack(model.trunk))
        else:
            self.vf_layers, self.vf_grads = module_layers(model.value_trunk, views)
            head, head_grads = module_layers(model.value_head, views)
            self.vf_layers += head
            self.vf_grads += head_grads
        self.log_std = None
        if policy.dist_class is DiagGaussian and model.free_log_std and hasattr(model, "log_std"):
            self.log_std = (model.log_std.detach().numpy(), views[id(model.log_std)])

    # --- the pass ----------------------------------------------------------------------------
    def multi_epoch_sgd(self, samples: SampleBatch, num_sgd_iter: int, minibatch_size: int,
                        shuffle: bool = True) -> Dict[str, Any]:
        """As `TorchPolicy.multi_epoch_sgd`: the same minibatches (the same permutations drawn
        from the policy's RNG), the same updates, the same result."""
        policy = self.policy
        result = start_result(policy, samples)
        cols = self._columns(samples)
        self._bind()
        # A NaN / inf is the NaN guard's to report (the update is skipped), not NumPy's.
        try:
            with single_threaded_blas(), np.errstate(all="ignore"):
                last_pass = sgd_passes(policy, cols, samples.count, num_sgd_iter, minibatch_size, shuffle,
                                       gather=lambda rows, order: {k: v[order] for k, v in rows.items()},
                                       step=self._step)
        finally:  # the acting snapshot (`TorchPolicy._numpy_net`) is rebuilt, also after a raise
            self.adam.touch()
        stats = {k: float(np.mean(np.asarray([s[k] for s in last_pass], np.float32))) for k in last_pass[0]}
        return finish_result(policy, result, stats)

    def _columns(self, samples: SampleBatch) -> Dict[str, np.ndarray]:
        """The loss columns as float32 (actions: int64 for Categorical) NumPy arrays, checked
        and decompressed as the torch path does it (`to_tensors`)."""
        tensors = self.policy.to_tensors(samples)
        n = samples.count
        cols = {k: t.numpy() for k, t in tensors.items()}
        out = {"obs": cols[SB.OBS].reshape(n, -1).astype(np.float32, copy=False)}
        for key in (SB.ACTION_LOGP, SB.ADVANTAGES, SB.VALUE_TARGETS):
            out[key] = cols[key].reshape(n).astype(np.float32, copy=False)
        out[SB.ACTION_DIST_INPUTS] = cols[SB.ACTION_DIST_INPUTS].reshape(n, -1).astype(np.float32, copy=False)
        actions = cols[SB.ACTIONS]
        out[SB.ACTIONS] = (actions.reshape(n).astype(np.int64, copy=False) if self.policy.dist_class is Categorical
                           else actions.reshape(n, -1).astype(np.float32, copy=False))
        return out

    def _step(self, batch: Dict[str, np.ndarray]) -> Dict[str, float]:
        policy = self.policy
        cfg = policy.config
        obs = batch["obs"]
        rows = len(obs)
        inv = np.float32(1.0 / rows)
        pi_outs = forward(self.pi_layers, obs)
        if self.shared:
            vf_outs = forward(self.vf_layers, pi_outs[self.trunk_len])
        else:
            vf_outs = forward(self.vf_layers, obs)
        dist_out = pi_outs[-1]
        if policy.dist_class is Categorical:
            losses, d_out = self._categorical(batch, dist_out, inv, cfg)
        else:
            losses, d_out, d_log_std = self._gaussian(batch, dist_out, inv, cfg)
        # The clipped value loss (`use_critic` holds: see `unsupported_reason`).
        err = vf_outs[-1][:, 0] - batch[SB.VALUE_TARGETS]
        sq = err * err
        vf_clip, coeff = cfg["vf_clip_param"], cfg["vf_loss_coeff"]
        vf_loss = float(np.minimum(sq, vf_clip).mean())
        total = losses["total_loss"] + coeff * vf_loss
        # clamp's gradient passes where 0 <= x <= max (torch's rule, bounds included)
        d_value = (np.float32(2.0 * coeff) * inv * err * (sq <= vf_clip))[:, None]
        losses["total_loss"], losses["vf_loss"] = total, vf_loss

        adam = self.adam
        adam.grad.fill(0.0)
        if self.log_std is not None:
            self.log_std[1][...] = d_log_std
        if self.shared:
            d_features = backward(self.pi_layers[self.trunk_len:], self.pi_grads[self.trunk_len:],
                                  pi_outs[self.trunk_len:], d_out, True)
            d_features = d_features + backward(self.vf_layers, self.vf_grads, vf_outs, d_value, True)
            if self.trunk_len:
                backward(self.pi_layers[:self.trunk_len], self.pi_grads[:self.trunk_len],
                         pi_outs[:self.trunk_len + 1], d_features, False)
        else:
            backward(self.pi_layers, self.pi_grads, pi_outs, d_out, False)
            backward(self.vf_layers, self.vf_grads, vf_outs, d_value, False)

        clip_guard_and_step(policy, {DEFAULT_OPTIMIZER: adam}, {DEFAULT_OPTIMIZER: total}, losses)
        return losses

    def _categorical(self, batch, logits: np.ndarray, inv, cfg) -> Tuple[Dict[str, float], np.ndarray]:
        policy = self.policy
        rows = np.arange(len(logits))
        actions = batch[SB.ACTIONS]
        logp_all = log_softmax(logits)
        logp = logp_all[rows, actions]
        ratio = np.exp(logp - batch[SB.ACTION_LOGP])
        d_ratio, policy_loss = _surrogate(ratio, batch[SB.ADVANTAGES], cfg["clip_param"])
        probs, old_probs, mean_kl, entropy = categorical_entropy_kl(logp_all, batch[SB.ACTION_DIST_INPUTS])

        g = np.zeros_like(logp_all)
        g[rows, actions] = -inv * d_ratio * ratio
        total = policy_loss
        coeff = policy.entropy_coeff
        if coeff != 0.0:
            total -= coeff * entropy
            g += np.float32(coeff) * inv * categorical_entropy_grad(probs, logp_all)
        if cfg["kl_coeff"] > 0.0:
            total += policy.kl_coeff * mean_kl
            g -= np.float32(policy.kl_coeff) * inv * old_probs
        d_logits = log_softmax_backward(g, probs)
        return {"total_loss": total, "policy_loss": policy_loss, "kl": mean_kl, "entropy": entropy}, d_logits

    def _gaussian(self, batch, out: np.ndarray, inv, cfg):
        policy = self.policy
        if self.log_std is not None:
            mean, log_std = out, np.broadcast_to(self.log_std[0], out.shape)
        else:
            k = out.shape[1] // 2
            mean, log_std = out[:, :k], out[:, k:]
        std = np.exp(log_std)
        z = (batch[SB.ACTIONS] - mean) / std
        logp = gaussian_log_density(z, log_std)
        ratio = np.exp(logp - batch[SB.ACTION_LOGP])
        d_ratio, policy_loss = _surrogate(ratio, batch[SB.ADVANTAGES], cfg["clip_param"])
        old_mean, var_ratio, mean_term, mean_kl, entropy = gaussian_entropy_kl(mean, log_std, std,
                                                                               batch[SB.ACTION_DIST_INPUTS])

        d_logp = (-inv * d_ratio * ratio)[:, None]
        d_mean = d_logp * z / std
        d_log_std = d_logp * (z * z - 1.0)
        total = policy_loss
        coeff = policy.entropy_coeff
        if coeff != 0.0:
            total -= coeff * entropy
            d_log_std = d_log_std - np.float32(coeff) * inv
        if cfg["kl_coeff"] > 0.0:
            total += policy.kl_coeff * mean_kl
            kl_scale = np.float32(policy.kl_coeff) * inv
            kl_d_mean, kl_d_log_std = gaussian_kl_grads(old_mean, mean, std, var_ratio, mean_term)
            d_mean = d_mean + kl_scale * kl_d_mean
            d_log_std = d_log_std + kl_scale * kl_d_log_std
        losses = {"total_loss": total, "policy_loss": policy_loss, "kl": mean_kl, "entropy": entropy}
        if self.log_std is not None:  # one log-std per action dimension, shared by every row
            return losses, d_mean, d_log_std.sum(0)
        return losses, np.concatenate([d_mean, d_log_std], axis=1), None


def _surrogate(ratio: np.ndarray, adv: np.ndarray, clip: float) -> Tuple[np.ndarray, float]:
    """`(d surrogate / d ratio per row, policy loss)` of `-mean(min(adv * r, adv * clip(r)))`.

    torch's `min` sends the whole gradient to the smaller side and half to each on a tie
    (every row whose ratio lies inside the clip range); `clamp` passes it inside its bounds,
    the bounds included."""
    unclipped = adv * ratio
    clipped = adv * np.clip(ratio, 1.0 - clip, 1.0 + clip)
    surrogate = np.minimum(unclipped, clipped)
    to_unclipped = np.where(unclipped < clipped, 1.0, np.where(unclipped == clipped, 0.5, 0.0))
    inside = (ratio >= 1.0 - clip) & (ratio <= 1.0 + clip)
    d_ratio = adv * (to_unclipped + (1.0 - to_unclipped) * inside)
    return d_ratio.astype(np.float32, copy=False), -float(surrogate.mean())


__all__ = ["FusedPPOSGD", "unsupported_reason"]
