"""Pendulum-v1 with its reward as a function of (obs, action, next_obs), for model-based
algorithms (MB-MPO) that score imagined transitions.

Gymnasium's Pendulum pays `-(theta^2 + 0.1 * theta_dot^2 + 0.001 * u^2)` for the state
*before* the step (theta normalised to [-pi, pi]) and the torque `u` clipped to
[-max_torque, max_torque] (gymnasium/envs/classic_control/pendulum.py). The observation is
`(cos theta, sin theta, theta_dot)`, so the reward is a function of `obs` and `action`.
"""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np


class PendulumWithReward(gym.Wrapper):
    """Pendulum-v1 (200-step episodes) with a batched `reward(obs, action, next_obs)`.

    Args:
        config: keyword arguments for `gym.make("Pendulum-v1", ...)` (e.g. `g`).
    """

    def __init__(self, config: Optional[dict] = None):
        super().__init__(gym.make("Pendulum-v1", **dict(config or {})))
        self.max_torque = float(self.env.unwrapped.max_torque)

    def reward(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        """Rewards of a batch of transitions: `obs` `[B, 3]`, `action` `[B, 1]` (as the env
        receives it), `next_obs` `[B, 3]` (unused: Pendulum pays for the state it left).

        Returns:
            `[B]` float32 rewards, equal to what `step` returns for the same transitions.
        """
        obs = np.asarray(obs, dtype=np.float64)
        theta = np.arctan2(obs[..., 1], obs[..., 0])
        theta_dot = obs[..., 2]
        u = np.clip(np.asarray(action, dtype=np.float64)[..., 0], -self.max_torque, self.max_torque)
        return (-(theta ** 2 + 0.1 * theta_dot ** 2 + 0.001 * u ** 2)).astype(np.float32)

    def __getattr__(self, name: str) -> Any:  # gym.Wrapper forwards nothing private
        return getattr(self.env, name)


__all__ = ["PendulumWithReward"]
