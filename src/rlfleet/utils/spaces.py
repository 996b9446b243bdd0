"""Helpers for action spaces: squashing into the normalised range, clipping, sampling, and the
flat layout actions take in sample batches.

Policies act in a flat layout (`action_layout`): Discrete -> one int per row, MultiDiscrete
and MultiBinary -> a flat int vector, Box -> a flat float vector, Dict / Tuple -> one flat
float32 vector holding every leaf's flat action in the space's order (a Discrete leaf takes
one slot). `env_actions` turns a batch of such rows into what the env's `step` takes.
"""
from __future__ import annotations

from typing import Any, List, Tuple

import gymnasium as gym
import numpy as np


def is_bounded_box(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))


def unsquash_action(action: np.ndarray, space: gym.Space) -> np.ndarray:
    """Maps actions from the normalised range [-1, 1] onto a bounded Box's [low, high].

    Other spaces (and unbounded boxes) pass through unchanged.
    """
    if not is_bounded_box(space):
        return action
    low, high = space.low, space.high
    out = low + (np.clip(action, -1.0, 1.0) + 1.0) * (high - low) / 2.0
    return out.astype(space.dtype, copy=False)


def clip_action(action: np.ndarray, space: gym.Space) -> np.ndarray:
    """Clips Box actions to the space's bounds; other spaces pass through."""
    if not isinstance(space, gym.spaces.Box):
        return action
    return np.clip(action, space.low, space.high).astype(space.dtype, copy=False)


def is_nested(space: gym.Space) -> bool:
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def leaf_spaces(space: gym.Space) -> List[gym.Space]:
    """The non-container sub-spaces of `space`, in flattening order."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for s in space.spaces.values() for leaf in leaf_spaces(s)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for s in space.spaces for leaf in leaf_spaces(s)]
    return [space]


def flat_action_size(space: gym.Space) -> int:
    """Slots one action of `space` takes in the flat layout (Discrete: 1)."""
    if isinstance(space, gym.spaces.Discrete):
        return 1
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.asarray(space.nvec).size)
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return int(np.prod(space.shape))
    if is_nested(space):
        return sum(flat_action_size(s) for s in leaf_spaces(space))
    raise ValueError(
        f"Unsupported action space {space}; supported: Discrete, MultiDiscrete, Box, MultiBinary "
        "and Dict / Tuple of these"
    )


def action_layout(space: gym.Space) -> Tuple[tuple, type]:
    """`(row shape, dtype)` of the policy's actions for `space` (what sample batches store)."""
    if isinstance(space, gym.spaces.Discrete):
        return (), np.int64
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return (flat_action_size(space),), np.int64
    if isinstance(space, gym.spaces.Box):
        return (flat_action_size(space),), np.float32
    return (flat_action_size(space),), np.float32  # Dict / Tuple (raises for others)


def _leaf_env_actions(flat: np.ndarray, space: gym.Space, normalize: bool, clip: bool) -> np.ndarray:
    """Rows `[B, size]` (or `[B]` for Discrete) of one leaf -> `[B, *space.shape]` env actions."""
    n = flat.shape[0]
    if isinstance(space, gym.spaces.Discrete):
        out = np.asarray(flat).reshape(n).astype(np.int64, copy=False)
        return out + int(space.start) if int(space.start) else out
    if isinstance(space, gym.spaces.MultiDiscrete):
        out = np.asarray(flat).reshape((n, *space.shape)).astype(space.dtype, copy=False)
        return out + space.start if np.any(space.start) else out
    if isinstance(space, gym.spaces.MultiBinary):
        return np.asarray(flat).reshape((n, *space.shape)).astype(space.dtype, copy=False)
    out = np.asarray(flat).reshape((n, *space.shape))
    if normalize:
        return unsquash_action(out, space)
    if clip:
        return clip_action(out, space)
    return out


def _build_nested(space: gym.Space, leaves, i: int, pos: List[int]):
    if isinstance(space, gym.spaces.Dict):
        return {k: _build_nested(s, leaves, i, pos) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_build_nested(s, leaves, i, pos) for s in space.spaces)
    value = leaves[pos[0]][i]
    pos[0] += 1
    return value


def env_actions(actions: np.ndarray, space: gym.Space, normalize_actions: bool, clip_actions: bool) -> Any:
    """What the env receives for the policy's `actions` (a batch in the flat layout).

    Box actions are unsquashed from [-1, 1] into the bounds when `normalize_actions`, else
    clipped when `clip_actions`. Returns an array `[B, *space.shape]`, or for Dict / Tuple
    spaces a list of B nested actions (dicts / tuples of arrays and ints).
    """
    if isinstance(space, gym.spaces.Box) and len(space.shape) <= 1:
        # The hot path for the common case: no reshape needed.
        if normalize_actions:
            return unsquash_action(actions, space)
        if clip_actions:
            return clip_action(actions, space)
        return actions
    if isinstance(space, gym.spaces.Discrete) and not int(space.start):
        return actions
    if not is_nested(space):
        return _leaf_env_actions(np.asarray(actions), space, normalize_actions, clip_actions)
    actions = np.asarray(actions)
    n = actions.shape[0]
    leaves, start = [], 0
    for leaf in leaf_spaces(space):
        size = flat_action_size(leaf)
        part = actions[:, start:start + size]
        if not isinstance(leaf, gym.spaces.Box):
            part = np.rint(part).astype(np.int64)
        leaves.append(_leaf_env_actions(part, leaf, normalize_actions, clip_actions))
        start += size
    out = []
    for i in range(n):
        value = _build_nested(space, leaves, i, [0])
        out.append(value)
    # Discrete leaves as Python-compatible numpy ints are in the space; keep them as is.
    return out


def env_action(action: np.ndarray, space: gym.Space, normalize_actions: bool, clip_actions: bool) -> Any:
    """`env_actions` for one action (no batch dimension)."""
    batch = np.asarray(action)[None]
    return env_actions(batch, space, normalize_actions, clip_actions)[0]


def flatten_action(action: Any, space: gym.Space) -> np.ndarray:
    """One env action (possibly nested) -> its row in the flat layout (inverse of `env_action`
    for unnormalised actions)."""
    if isinstance(space, gym.spaces.Discrete):
        return np.asarray(int(action) - int(space.start), np.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return (np.asarray(action, np.int64) - space.start).reshape(-1)
    if isinstance(space, gym.spaces.MultiBinary):
        return np.asarray(action, np.int64).reshape(-1)
    if isinstance(space, gym.spaces.Box):
        return np.asarray(action, np.float32).reshape(-1)
    if isinstance(space, gym.spaces.Dict):
        parts = [flatten_action(action[k], s) for k, s in space.spaces.items()]
    elif isinstance(space, gym.spaces.Tuple):
        parts = [flatten_action(a, s) for a, s in zip(action, space.spaces)]
    else:
        raise ValueError(f"Unsupported action space {space}")
    return np.concatenate([np.asarray(p, np.float32).reshape(-1) for p in parts]).astype(np.float32)


def policy_action_bounds(space: gym.Space, normalize_actions: bool):
    """`(low, high)` float32 arrays of the Box range a policy acts in: [-1, 1] when actions
    are normalized (and the box is bounded; the sampler unsquashes them), else the box's
    own bounds (possibly infinite)."""
    if normalize_actions and is_bounded_box(space):
        return -np.ones(space.shape, np.float32), np.ones(space.shape, np.float32)
    return np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
