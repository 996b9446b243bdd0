"""The acting part of a fully connected policy as one flat parameter vector `theta`, and a
NumPy forward pass over any such vector (what a perturbation worker acts with).

`theta` holds the weights and biases of the model's trunk and logits layers (each layer's
`W [out, in]` row-major, then its `b [out]`), nothing of the value branch or a free log-std:
ES and ARS act on the distribution's mode (argmax for Discrete, the mean for Box), so only
those layers shape the behaviour being searched.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.fast.mlp import LinearStack


@dataclass(frozen=True)
class FlatLayout:
    """Shapes and activations of the layers `theta` holds.

    Attributes:
        shapes: `(out, in)` per layer, in forward order.
        activations: "tanh", "relu" or None per layer.
        discrete: act by argmax (Discrete actions) or on the mean (Box actions).
        action_dim: the number of action entries a Box action has (its mean's width).
    """

    shapes: Tuple[Tuple[int, int], ...]
    activations: Tuple[Optional[str], ...]
    discrete: bool
    action_dim: int

    @property
    def num_params(self) -> int:
        return sum(o * i + o for o, i in self.shapes)


def policy_layers(model, algorithm: str) -> LinearStack:
    """The trunk and logits layers of `model` (a fully connected catalog model)."""
    stacks = model.linear_stacks() if hasattr(model, "linear_stacks") else {}
    trunk, logits = stacks.get("trunk"), stacks.get("logits")
    if trunk is None or logits is None or not trunk + logits:
        raise ValueError(f"{algorithm} searches the weights of a fully connected policy: set model.fcnet_hiddens "
                         "(e.g. [] for a linear policy) and no custom_model, conv_filters, use_lstm or use_attention "
                         f"(got a {type(model).__name__})")
    return trunk + logits


def flat_layout(model, action_space: gym.Space, algorithm: str) -> FlatLayout:
    """The layout of `model`'s acting layers for `action_space` (Discrete or Box)."""
    if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
        raise ValueError(f"{algorithm} acts in Discrete or Box action spaces; got {action_space}")
    layers = policy_layers(model, algorithm)
    return FlatLayout(shapes=tuple((lin.out_features, lin.in_features) for lin, _ in layers),
                      activations=tuple(act for _, act in layers),
                      discrete=isinstance(action_space, gym.spaces.Discrete),
                      action_dim=int(np.prod(action_space.shape)) if action_space.shape else 1)


def get_flat(model, algorithm: str) -> np.ndarray:
    """`theta` (float32) read from `model`'s acting layers."""
    parts: List[np.ndarray] = []
    for lin, _ in policy_layers(model, algorithm):
        parts += [lin.weight.detach().cpu().numpy().ravel(), lin.bias.detach().cpu().numpy()]
    return np.concatenate(parts).astype(np.float32)


def set_flat(model, theta: np.ndarray, algorithm: str) -> None:
    """Writes `theta` into `model`'s acting layers (so that acting, export and checkpoints
    see it)."""
    offset = 0
    with torch.no_grad():
        for lin, _ in policy_layers(model, algorithm):
            for param in (lin.weight, lin.bias):
                size = param.numel()
                param.copy_(torch.as_tensor(theta[offset:offset + size]).view_as(param))
                offset += size
    if offset != len(theta):
        raise ValueError(f"{algorithm}: theta has {len(theta)} entries, the policy's layers {offset}")


class FlatMLPActor:
    """Acts with `theta` laid out as `layout`: one observation in, its action's row out
    (an int for Discrete, the mean `[action_dim]` for Box)."""

    def __init__(self, layout: FlatLayout, theta: np.ndarray):
        self.layout = layout
        self.layers: List[Tuple[np.ndarray, np.ndarray, Optional[str]]] = []
        offset = 0
        theta = np.asarray(theta, dtype=np.float32)
        for (out, inp), act in zip(layout.shapes, layout.activations):
            w = theta[offset:offset + out * inp].reshape(out, inp)
            offset += out * inp
            self.layers.append((w, theta[offset:offset + out], act))
            offset += out

    def __call__(self, obs: np.ndarray):
        x = obs.reshape(-1).astype(np.float32, copy=False)
        for w, b, act in self.layers:
            x = w @ x + b
            if act == "tanh":
                np.tanh(x, out=x)
            elif act == "relu":
                np.maximum(x, 0.0, out=x)
        if self.layout.discrete:
            return int(x.argmax())
        return x[:self.layout.action_dim]


__all__ = ["FlatLayout", "FlatMLPActor", "flat_layout", "get_flat", "set_flat", "policy_layers"]
