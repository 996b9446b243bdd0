"""The greedy action, as the env takes it, inside an exported graph: what
`compute_single_action(obs, explore=False)` returns.

Every exploration acts greedily with `dist.deterministic_sample()` (argmax for categorical
actions, the mean for Gaussians, the squashed mean for SAC). The flat action then goes to the
env as `rlfleet.utils.spaces.env_actions` sends it, with the policy's `normalize_actions` /
`clip_actions`: Box actions unsquashed from [-1, 1] into bounded limits (or clipped), the
same float32 arithmetic in the same order, so the numbers agree bit for bit; Discrete and
MultiDiscrete actions shifted by the space's `start`. Dict / Tuple action spaces give one
output per leaf, in the space's order, named `actions.<key>` / `actions.<index>`.
"""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np
import torch
from gymnasium import spaces

from rlfleet.utils.spaces import flat_action_size, is_bounded_box, is_nested


def _torch_dtype(dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=np.dtype(dtype))).dtype


class _LeafAction(torch.nn.Module):
    """Rows `[B, size]` (`[B]` for Discrete) of one leaf -> `[B, *space.shape]` env actions."""

    def __init__(self, space: Any, normalize: bool, clip: bool):
        super().__init__()
        self.discrete = isinstance(space, spaces.Discrete)
        self.integer = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
        self.shape = tuple(int(s) for s in space.shape)
        self.dtype = torch.int64 if self.discrete else _torch_dtype(space.dtype)
        start = np.asarray(getattr(space, "start", 0), np.int64)
        self.shifted = self.integer and bool(np.any(start))
        self.register_buffer("start", torch.as_tensor(start))
        # `unsquash_action` / `clip_action` of utils/spaces.py, same operations in the same order.
        self.unsquash = isinstance(space, spaces.Box) and normalize and is_bounded_box(space)
        self.clip = isinstance(space, spaces.Box) and not normalize and clip
        if self.unsquash or self.clip:
            low = np.asarray(space.low, np.float32)
            high = np.asarray(space.high, np.float32)
            self.register_buffer("low", torch.as_tensor(low))
            self.register_buffer("high", torch.as_tensor(high))
            self.register_buffer("span", torch.as_tensor(high - low))

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            out = flat.reshape(-1).to(torch.int64)
        else:
            out = flat.reshape((-1, *self.shape))
            if self.integer:
                out = torch.round(out) if out.is_floating_point() else out
                out = out.to(torch.int64)
        if self.shifted:
            out = out + self.start
        if self.unsquash:
            out = self.low + (torch.clamp(out, -1.0, 1.0) + 1.0) * self.span / 2.0
        elif self.clip:
            out = torch.minimum(torch.maximum(out, self.low), self.high)
        return out.to(self.dtype)


class GreedyEnvActions(torch.nn.Module):
    """`dist_inputs -> (actions, ...)`: one tensor per leaf of the action space."""

    def __init__(self, dist_class: Any, model: torch.nn.Module, action_space: Any, normalize: bool, clip: bool):
        super().__init__()
        self.dist_class = dist_class
        self.model = [model]  # a plain list: the model is the graph's, not registered twice
        self.nested = is_nested(action_space)
        leaves = _leaf_spaces_named(action_space, "actions")
        self.names = [name for name, _ in leaves]
        self.sizes = [flat_action_size(space) for _, space in leaves]
        self.leaves = torch.nn.ModuleList([_LeafAction(space, normalize, clip) for _, space in leaves])

    def forward(self, dist_inputs: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        flat = self.dist_class(dist_inputs, self.model[0]).deterministic_sample()
        if not self.nested:
            return (self.leaves[0](flat),)
        parts = torch.split(flat, self.sizes, dim=1)
        return tuple(leaf(part) for leaf, part in zip(self.leaves, parts))


def _leaf_spaces_named(space: Any, name: str) -> List[Tuple[str, Any]]:
    if isinstance(space, spaces.Dict):
        return [leaf for key, s in space.spaces.items() for leaf in _leaf_spaces_named(s, f"{name}.{key}")]
    if isinstance(space, spaces.Tuple):
        return [leaf for i, s in enumerate(space.spaces) for leaf in _leaf_spaces_named(s, f"{name}.{i}")]
    return [(name, space)]


__all__ = ["GreedyEnvActions"]
