"""PPO's loss and its gradients in NumPy: `ppo_surrogate_loss` (the clipped surrogate with
torch's rule for ties in `min`, the KL penalty, the entropy bonus, the clipped value loss)
through a fully connected policy / value net. Returns the losses and writes the gradients;
clipping and stepping are the learning loop's (policy/learning_loop.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from rlfleet.fast.distributions import (categorical_entropy_grad, categorical_entropy_kl, gaussian_entropy_kl,
                                        gaussian_kl_grads, gaussian_log_density, log_softmax, log_softmax_backward)
from rlfleet.fast.mlp import Layer, backward, forward


@dataclass
class PPOCoefficients:
    """The loss's settings for one update (`entropy_coeff` and `kl_coeff` move between updates)."""

    clip_param: float
    vf_clip_param: float
    vf_loss_coeff: float
    entropy_coeff: float
    kl_coeff: float
    use_kl: bool  # the config's kl_coeff > 0: the KL term is in the loss


@dataclass
class PPONet:
    """NumPy views of a FullyConnectedNetwork's policy and value layers and their gradients.

    `shared`: the value head reads the trunk's last hidden layer (`trunk_len` layers of
    `pi_layers`); `log_std`: `(value, gradient view)` of a free log-std, or None."""

    pi_layers: List[Layer]
    pi_grads: list
    vf_layers: List[Layer]
    vf_grads: list
    shared: bool
    trunk_len: int
    log_std: Optional[Tuple[np.ndarray, np.ndarray]]


def surrogate(ratio: np.ndarray, adv: np.ndarray, clip: float) -> Tuple[np.ndarray, float]:
    """`(d surrogate / d ratio per row, policy loss)` of `-mean(min(adv * r, adv * clip(r)))`.

    torch's `min` sends the whole gradient to the smaller side and half to each on a tie
    (every row whose ratio lies inside the clip range); `clamp` passes it inside its bounds,
    the bounds included."""
    unclipped = adv * ratio
    clipped = adv * np.clip(ratio, 1.0 - clip, 1.0 + clip)
    surrogate_rows = np.minimum(unclipped, clipped)
    to_unclipped = np.where(unclipped < clipped, 1.0, np.where(unclipped == clipped, 0.5, 0.0))
    inside = (ratio >= 1.0 - clip) & (ratio <= 1.0 + clip)
    d_ratio = adv * (to_unclipped + (1.0 - to_unclipped) * inside)
    return d_ratio.astype(np.float32, copy=False), -float(surrogate_rows.mean())


def categorical_policy_loss(logits, actions, old_logp, old_inputs, adv, c: PPOCoefficients, inv
                            ) -> Tuple[Dict[str, float], np.ndarray]:
    """`(losses, d loss / d logits)` of the surrogate, entropy and KL terms."""
    rows = np.arange(len(logits))
    logp_all = log_softmax(logits)
    ratio = np.exp(logp_all[rows, actions] - old_logp)
    d_ratio, policy_loss = surrogate(ratio, adv, c.clip_param)
    probs, old_probs, mean_kl, entropy = categorical_entropy_kl(logp_all, old_inputs)
    g = np.zeros_like(logp_all)
    g[rows, actions] = -inv * d_ratio * ratio
    total = policy_loss
    if c.entropy_coeff != 0.0:
        total -= c.entropy_coeff * entropy
        g += np.float32(c.entropy_coeff) * inv * categorical_entropy_grad(probs, logp_all)
    if c.use_kl:
        total += c.kl_coeff * mean_kl
        g -= np.float32(c.kl_coeff) * inv * old_probs
    losses = {"total_loss": total, "policy_loss": policy_loss, "kl": mean_kl, "entropy": entropy}
    return losses, log_softmax_backward(g, probs)


def gaussian_policy_loss(out, free_log_std, actions, old_logp, old_inputs, adv, c: PPOCoefficients, inv):
    """`(losses, d loss / d out, d loss / d free log-std or None)`; `out` holds the means then
    the log-stds, or only the means with a `free_log_std` vector."""
    if free_log_std is not None:
        mean, log_std = out, np.broadcast_to(free_log_std, out.shape)
    else:
        k = out.shape[1] // 2
        mean, log_std = out[:, :k], out[:, k:]
    std = np.exp(log_std)
    z = (actions - mean) / std
    ratio = np.exp(gaussian_log_density(z, log_std) - old_logp)
    d_ratio, policy_loss = surrogate(ratio, adv, c.clip_param)
    old_mean, var_ratio, mean_term, mean_kl, entropy = gaussian_entropy_kl(mean, log_std, std, old_inputs)
    d_logp = (-inv * d_ratio * ratio)[:, None]
    d_mean = d_logp * z / std
    d_log_std = d_logp * (z * z - 1.0)
    total = policy_loss
    if c.entropy_coeff != 0.0:
        total -= c.entropy_coeff * entropy
        d_log_std = d_log_std - np.float32(c.entropy_coeff) * inv
    if c.use_kl:
        total += c.kl_coeff * mean_kl
        kl_scale = np.float32(c.kl_coeff) * inv
        kl_d_mean, kl_d_log_std = gaussian_kl_grads(old_mean, mean, std, var_ratio, mean_term)
        d_mean = d_mean + kl_scale * kl_d_mean
        d_log_std = d_log_std + kl_scale * kl_d_log_std
    losses = {"total_loss": total, "policy_loss": policy_loss, "kl": mean_kl, "entropy": entropy}
    if free_log_std is not None:  # one log-std per action dimension, shared by every row
        return losses, d_mean, d_log_std.sum(0)
    return losses, np.concatenate([d_mean, d_log_std], axis=1), None


def clipped_value_loss(values, targets, vf_clip: float, coeff: float, inv) -> Tuple[float, np.ndarray]:
    """`(mean(min((v - target)^2, vf_clip)), d (coeff * loss) / d v as a column)`: clamp's
    gradient passes where 0 <= x <= max (torch's rule, bounds included)."""
    err = values - targets
    sq = err * err
    return float(np.minimum(sq, vf_clip).mean()), (np.float32(2.0 * coeff) * inv * err * (sq <= vf_clip))[:, None]


def ppo_gradients(net: PPONet, obs, actions, old_logp, old_inputs, adv, value_targets, c: PPOCoefficients,
                  categorical: bool) -> Dict[str, float]:
    """The losses of one minibatch; writes every gradient into `net`'s gradient views (which
    the caller zeroed)."""
    inv = np.float32(1.0 / len(obs))
    pi_outs = forward(net.pi_layers, obs)
    vf_outs = forward(net.vf_layers, pi_outs[net.trunk_len] if net.shared else obs)
    if categorical:
        losses, d_out = categorical_policy_loss(pi_outs[-1], actions, old_logp, old_inputs, adv, c, inv)
    else:
        free = None if net.log_std is None else net.log_std[0]
        losses, d_out, d_log_std = gaussian_policy_loss(pi_outs[-1], free, actions, old_logp, old_inputs, adv, c,
                                                        inv)
        if net.log_std is not None:
            net.log_std[1][...] = d_log_std
    vf_loss, d_value = clipped_value_loss(vf_outs[-1][:, 0], value_targets, c.vf_clip_param, c.vf_loss_coeff, inv)
    losses["total_loss"] += c.vf_loss_coeff * vf_loss
    losses["vf_loss"] = vf_loss
    t = net.trunk_len
    if net.shared:
        d_features = backward(net.pi_layers[t:], net.pi_grads[t:], pi_outs[t:], d_out, True)
        d_features = d_features + backward(net.vf_layers, net.vf_grads, vf_outs, d_value, True)
        if t:
            backward(net.pi_layers[:t], net.pi_grads[:t], pi_outs[:t + 1], d_features, False)
    else:
        backward(net.pi_layers, net.pi_grads, pi_outs, d_out, False)
        backward(net.vf_layers, net.vf_grads, vf_outs, d_value, False)
    return losses


__all__ = ["PPOCoefficients", "PPONet", "categorical_policy_loss", "clipped_value_loss", "gaussian_policy_loss",
           "ppo_gradients", "surrogate"]
