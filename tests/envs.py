"""Tiny envs for tests. Constructors take an EnvContext (or plain dict) like real creators."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Observation counts steps; terminates after `episode_len` steps (env_config key).

    Keeps the EnvContext it was built with so tests can check what the creator passed.
    """

    def __init__(self, env_config: Any = None) -> None:
        self.env_config = env_config if env_config is not None else {}
        self.episode_len = int(self.env_config.get("episode_len", 5))
        self.observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self._t += 1
        obs = np.array([self._t], np.float32)
        return obs, 1.0, self._t >= self.episode_len, False, {}
