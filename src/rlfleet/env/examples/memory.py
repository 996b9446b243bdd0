"""Partially observed envs that a feed-forward policy cannot solve and a recurrent one can."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class RepeatFirstObsEnv(gym.Env):
    """Shows a random token (one-hot of `num_tokens`) at the first step only, then blanks
    for `episode_len - 1` steps; at the last step (flagged in the observation) the agent
    earns +1 for naming the token it saw first. Other steps give 0 whatever the action.

    A memoryless policy scores 1 / num_tokens per episode on average; one that remembers
    the first observation scores 1.

    env_config keys: `episode_len` (default 5), `num_tokens` (default 2).
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        self.episode_len = int(cfg.get("episode_len", 5))
        self.num_tokens = int(cfg.get("num_tokens", 2))
        # One-hot token, then a "now answer" flag.
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.num_tokens + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(self.num_tokens)
        self._t = 0
        self._token = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.num_tokens + 1, np.float32)
        if self._t == 0:
            obs[self._token] = 1.0
        if self._t == self.episode_len - 1:
            obs[-1] = 1.0
        return obs

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._t = 0
        self._token = int(self.np_random.integers(self.num_tokens))
        return self._obs(), {}

    def step(self, action: Any):
        last = self._t == self.episode_len - 1
        reward = float(int(action) == self._token) if last else 0.0
        self._t += 1
        return self._obs() if not last else np.zeros(self.num_tokens + 1, np.float32), reward, last, False, {}


class StatelessCartPole(CartPoleEnv):
    """CartPole that shows only the cart position and the pole angle (velocities hidden):
    a policy must infer the velocities from the sequence of observations.

    Episodes are truncated at `max_episode_steps` (env_config, default 500).
    """

    def __init__(self, env_config: Optional[dict] = None):
        super().__init__()
        cfg = dict(env_config or {})
        self.max_episode_steps = int(cfg.get("max_episode_steps", 500))
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self._steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, info = super().reset(seed=seed, options=options)
        self._steps = 0
        return obs[[0, 2]].astype(np.float32), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(int(action))
        self._steps += 1
        truncated = truncated or self._steps >= self.max_episode_steps
        return obs[[0, 2]].astype(np.float32), reward, terminated, truncated, info


class StatelessPendulum(PendulumEnv):
    """Pendulum that shows only cos and sin of the angle (the angular velocity hidden): a policy
    must infer the velocity from the sequence of observations.

    Episodes are truncated at `max_episode_steps` (env_config, default 200, as Pendulum-v1).
    """

    def __init__(self, env_config: Optional[dict] = None):
        super().__init__()
        cfg = dict(env_config or {})
        self.max_episode_steps = int(cfg.get("max_episode_steps", 200))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, info = super().reset(seed=seed, options=options)
        self._steps = 0
        return obs[:2].astype(np.float32), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        self._steps += 1
        truncated = truncated or self._steps >= self.max_episode_steps
        return obs[:2].astype(np.float32), reward, terminated, truncated, info
