"""Helpers for action spaces: squashing into the normalised range, clipping, sampling."""
from __future__ import annotations

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


def env_actions(actions: np.ndarray, space: gym.Space, normalize_actions: bool, clip_actions: bool) -> np.ndarray:
    """What the env receives for the policy's `actions` under the two config flags."""
    if normalize_actions:
        actions = unsquash_action(actions, space)
    elif clip_actions:
        actions = clip_action(actions, space)
    return actions
