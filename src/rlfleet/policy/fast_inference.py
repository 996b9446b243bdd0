"""NumPy inference for fully connected policies: the sampler's hot path.

For the small batches a rollout worker acts on (one row per sub-env), a torch forward
pass costs far more in per-op dispatch than in arithmetic. A NumPy copy of the same
weights computes identical-in-distribution actions several times faster. The copy is
rebuilt lazily whenever the policy's weights change (`version`).

Only used when exact: a `FullyConnectedNetwork` with a Categorical or DiagGaussian
action distribution and StochasticSampling exploration; anything else uses torch.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
from torch import nn

from rlfleet.models.distributions import Categorical, DiagGaussian
from rlfleet.models.fcnet import FullyConnectedNetwork

_ACTS = {nn.Tanh: np.tanh, nn.ReLU: lambda x: np.maximum(x, 0.0, out=x)}


def _layers(module: nn.Module) -> Optional[List[Tuple[np.ndarray, np.ndarray, object]]]:
    """(W^T, b, activation) per Linear of an MLP made of Linear + supported activations."""
    mods = [module] if isinstance(module, (nn.Linear, nn.Identity)) else list(module)
    layers: List[Tuple[np.ndarray, np.ndarray, object]] = []
    for m in mods:
        if isinstance(m, nn.Linear):
            layers.append([m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy(), None])
        elif type(m) in _ACTS and layers:
            layers[-1][2] = _ACTS[type(m)]
        elif not isinstance(m, nn.Identity):
            return None
    return [tuple(layer) for layer in layers]


def _run(layers, x: np.ndarray) -> np.ndarray:
    for w, b, act in layers:
        x = x @ w
        x += b
        if act is not None:
            x = act(x)
    return x


class NumpyMLPInference:
    """A NumPy snapshot of a FullyConnectedNetwork's forward and value passes."""

    def __init__(self, model: FullyConnectedNetwork):
        self.trunk = _layers(model.trunk)
        self.logits = _layers(model.logits)
        self.value_trunk = None if model.value_trunk is None else _layers(model.value_trunk)
        self.value_head = _layers(model.value_head)
        self.log_std = None if not model.free_log_std else model.log_std.detach().numpy().copy()
        self.ok = None not in (self.trunk, self.logits, self.value_head) and (
            model.value_trunk is None or self.value_trunk is not None)

    def __call__(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Returns `(dist_inputs [B, K], values [B])`."""
        obs = obs.reshape(len(obs), -1)
        features = _run(self.trunk, obs)
        out = _run(self.logits, features)
        if self.log_std is not None:
            out = np.concatenate([out, np.broadcast_to(self.log_std, out.shape)], axis=1)
        value_in = features if self.value_trunk is None else _run(self.value_trunk, obs)
        return out, _run(self.value_head, value_in)[:, 0]


def supports_fast_path(policy) -> bool:
    from rlfleet.exploration.stochastic_sampling import StochasticSampling

    return (
        type(policy.model) is FullyConnectedNetwork
        and policy.model.scale is None  # uint8 inputs: the torch path scales them
        and policy.dist_class in (Categorical, DiagGaussian)
        and type(policy.exploration) is StochasticSampling
    )


def sample_numpy(dist_class, inputs: np.ndarray, explore: bool, rng: np.random.Generator
                 ) -> Tuple[np.ndarray, np.ndarray]:
    """`(actions, logp)` drawn from the distribution over `inputs`, in NumPy."""
    if dist_class is Categorical:
        shifted = inputs - inputs.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        if not explore:
            actions = inputs.argmax(axis=1)
            return actions, np.zeros(len(actions), np.float32)
        # Gumbel-max: argmax(logits + Gumbel noise) is a draw from the softmax.
        gumbel = -np.log(-np.log(rng.random(inputs.shape, dtype=np.float32) + 1e-20) + 1e-20)
        actions = (log_probs + gumbel).argmax(axis=1)
        return actions, log_probs[np.arange(len(actions)), actions].astype(np.float32)
    mean, log_std = np.split(inputs, 2, axis=1)
    if not explore:
        return mean, np.zeros(len(mean), np.float32)
    noise = rng.standard_normal(mean.shape, dtype=np.float32)
    actions = mean + np.exp(log_std) * noise
    logp = -0.5 * (noise * noise).sum(1) - log_std.sum(1) - 0.5 * np.log(2 * np.pi) * mean.shape[1]
    return actions, logp.astype(np.float32)


__all__ = ["NumpyMLPInference", "supports_fast_path", "sample_numpy"]
