"""The action distributions' maths in NumPy, once: log-softmax, Categorical and (squashed)
Gaussian log-densities, entropies and KLs with their gradients, and sampling.

A distribution class says which of these it is through its own `numpy_kind` class attribute
("categorical": inputs are logits; "gaussian": inputs are `[mean, log_std]`); `numpy_kind`
reads it off the class itself, so a subclass (another distribution) is never mistaken for it.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

CATEGORICAL = "categorical"
GAUSSIAN = "gaussian"
LOG_2PI = math.log(2.0 * math.pi)


def numpy_kind(dist_class: Any) -> Optional[str]:
    """`dist_class`'s own `numpy_kind` (not an inherited one); None: no NumPy maths for it."""
    return vars(dist_class).get("numpy_kind") if isinstance(dist_class, type) else None


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def gumbel(u: np.ndarray) -> np.ndarray:
    """Gumbel noise from uniform draws: argmax(logits + g) is a draw from softmax(logits)."""
    return -np.log(-np.log(u + 1e-20) + 1e-20)


def gaussian_log_density(z: np.ndarray, log_std: np.ndarray, constant: type = np.float32) -> np.ndarray:
    """log N per row given the standardised draw `z = (x - mean) / std` and `log_std`.
    `constant`: the normaliser's dtype (acting has always subtracted it in float64, then
    rounded to float32; the learners stay in float32 as the torch loss does)."""
    return -0.5 * (z * z).sum(1) - log_std.sum(1) - constant(0.5 * LOG_2PI * z.shape[1])


def categorical_logp(inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log softmax(inputs)[action] per row, float32."""
    top = inputs.max(axis=1, keepdims=True)
    lse = np.log(np.exp(inputs - top).sum(axis=1)) + top[:, 0]
    return (np.take_along_axis(inputs, actions.reshape(-1, 1).astype(np.intp), 1)[:, 0] - lse).astype(np.float32)


def gaussian_logp(inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log N(actions; mean, exp(log_std)) per row, float32 (`inputs` = [mean, log_std])."""
    mean, log_std = np.split(inputs, 2, axis=1)
    z = (actions.reshape(mean.shape) - mean) * np.exp(-log_std)
    return gaussian_log_density(z, log_std, np.float64).astype(np.float32)


def sample_numpy(dist_class, inputs: np.ndarray, explore: bool, rng: np.random.Generator
                 ) -> Tuple[np.ndarray, np.ndarray]:
    """`(actions, logp)` drawn from the distribution over `inputs` (logp 0 when greedy)."""
    if numpy_kind(dist_class) == CATEGORICAL:
        if not explore:
            actions = inputs.argmax(axis=1)
            return actions, np.zeros(len(actions), np.float32)
        log_probs = log_softmax(inputs)
        actions = (log_probs + gumbel(rng.random(inputs.shape, dtype=np.float32))).argmax(axis=1)
        return actions, log_probs[np.arange(len(actions)), actions].astype(np.float32)
    mean, log_std = np.split(inputs, 2, axis=1)
    if not explore:
        return mean, np.zeros(len(mean), np.float32)
    noise = rng.standard_normal(mean.shape, dtype=np.float32)
    actions = mean + np.exp(log_std) * noise
    return actions, gaussian_log_density(noise, log_std, np.float64).astype(np.float32)


def categorical_entropy_kl(logp_all: np.ndarray, old_logits: np.ndarray
                           ) -> Tuple[np.ndarray, np.ndarray, float, float]:
    """`(probs, old_probs, mean KL(old || new), mean entropy)` of Categoricals with
    log-probabilities `logp_all` against the ones over `old_logits`."""
    probs = np.exp(logp_all)
    old_logp_all = log_softmax(old_logits)
    old_probs = np.exp(old_logp_all)
    mean_kl = float((old_probs * (old_logp_all - logp_all)).sum(1).mean())
    entropy = float(-(probs * logp_all).sum(1).mean())
    return probs, old_probs, mean_kl, entropy


def categorical_entropy_grad(probs: np.ndarray, logp_all: np.ndarray) -> np.ndarray:
    """d(-entropy) / d log-probabilities, per row (before log_softmax's backward)."""
    return probs * (logp_all + 1.0)


def log_softmax_backward(g: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """The gradient for the logits, given `g` for log_softmax's output."""
    return g - probs * g.sum(1, keepdims=True)


def gaussian_entropy_kl(mean: np.ndarray, log_std: np.ndarray, std: np.ndarray, old_inputs: np.ndarray):
    """`(old_mean, var_ratio, mean_term, mean KL(old || new), mean entropy)` of diagonal
    Gaussians against the old `[mean, log_std]` inputs; `var_ratio` and `mean_term` are
    what the KL's gradient needs (`gaussian_kl_grads`)."""
    old_mean, old_log_std = np.split(old_inputs, 2, axis=1)
    var_ratio = (np.exp(old_log_std) / std) ** 2
    mean_term = ((old_mean - mean) / std) ** 2
    mean_kl = float((0.5 * (var_ratio + mean_term - 1.0 - np.log(var_ratio))).sum(1).mean())
    entropy = float((log_std + np.float32(0.5 * (LOG_2PI + 1.0))).sum(1).mean())
    return old_mean, var_ratio, mean_term, mean_kl, entropy


def gaussian_kl_grads(old_mean, mean, std, var_ratio, mean_term) -> Tuple[np.ndarray, np.ndarray]:
    """`(d KL / d mean, d KL / d log_std)` per row and dimension."""
    return -(old_mean - mean) / (std * std), 1.0 - var_ratio - mean_term


def softplus(x: np.ndarray) -> np.ndarray:
    """torch's softplus (beta 1, threshold 20)."""
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def tanh_log_det(u: np.ndarray, log_half_range: np.ndarray) -> np.ndarray:
    """log |d action / d u| per element of the squashing `low + (tanh(u) + 1) * range / 2`."""
    return 2.0 * (np.float32(math.log(2.0)) - u - softplus(-2.0 * u)) + log_half_range


def tanh_log_det_grad(u: np.ndarray) -> np.ndarray:
    """d(-log_det) / du of `tanh_log_det` per element."""
    return 2.0 - 4.0 * sigmoid(-2.0 * u)


__all__ = ["CATEGORICAL", "GAUSSIAN", "LOG_2PI", "categorical_entropy_grad", "categorical_entropy_kl",
           "categorical_logp", "gaussian_entropy_kl", "gaussian_kl_grads", "gaussian_log_density", "gaussian_logp",
           "gumbel", "log_softmax", "log_softmax_backward", "numpy_kind", "sample_numpy", "sigmoid", "softplus",
           "tanh_log_det", "tanh_log_det_grad"]
