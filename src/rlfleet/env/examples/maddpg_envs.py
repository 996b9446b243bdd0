"""Envs of MADDPG's tuned examples and tests, importable by class path from YAML
(``env: rlfleet.env.examples.maddpg_envs:SimpleSpread``).

- `SimpleSpread`, `SimpleSpeakerListener`: mpe2's particle worlds with discrete actions
  through the PettingZoo Parallel adapter; `env_config` keys are passed to mpe2's
  `parallel_env` (default `max_cycles=25`, `continuous_actions=False`). mpe2 is imported
  when one is made.
- `MatchTargetEnv`: a tiny cooperative game for fast learning tests.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv
from rlfleet.env.pettingzoo import ParallelPettingZooEnv

_MPE_DEFAULTS = {"max_cycles": 25, "continuous_actions": False}


class SimpleSpread(ParallelPettingZooEnv):
    """mpe2's `simple_spread_v3` (3 agents cover 3 landmarks; shared and local rewards)."""

    def __init__(self, env_config: Optional[Dict[str, Any]] = None):
        from mpe2 import simple_spread_v3

        super().__init__(simple_spread_v3.parallel_env(**{**_MPE_DEFAULTS, **dict(env_config or {})}))


class SimpleSpeakerListener(ParallelPettingZooEnv):
    """mpe2's `simple_speaker_listener_v4` (a speaker that sees the goal's colour talks to a
    listener that moves; both get the listener's distance to the goal)."""

    def __init__(self, env_config: Optional[Dict[str, Any]] = None):
        from mpe2 import simple_speaker_listener_v4

        super().__init__(simple_speaker_listener_v4.parallel_env(**{**_MPE_DEFAULTS, **dict(env_config or {})}))


class MatchTargetEnv(MultiAgentEnv):
    """Two agents see a target in {0, 1, 2} (one-hot) each step and both get 1 when both
    choose it, 0.25 when one does: random play earns about 1.8 per 8-step episode, the
    optimum 8."""

    possible_agents = ["a", "b"]
    _steps = 8

    def __init__(self, env_config: Optional[Dict[str, Any]] = None):
        space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.observation_spaces = {a: space for a in self.possible_agents}
        self.action_spaces = {a: gym.spaces.Discrete(3) for a in self.possible_agents}
        self.observation_space, self.action_space = space, gym.spaces.Discrete(3)
        self._rng = np.random.default_rng()
        self._t, self._target = 0, 0

    def _obs(self) -> Dict[str, np.ndarray]:
        self._target = int(self._rng.integers(3))
        one_hot = np.eye(3, dtype=np.float32)[self._target]
        return {a: one_hot.copy() for a in self.possible_agents}

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action_dict):
        hits = sum(int(action_dict[a]) == self._target for a in self.possible_agents)
        reward = {2: 1.0, 1: 0.25, 0: 0.0}[hits]
        self._t += 1
        done = self._t >= self._steps
        obs = self._obs()
        rewards = {a: reward for a in self.possible_agents}
        terminateds = {a: False for a in self.possible_agents}
        truncateds = {a: done for a in self.possible_agents}
        terminateds[ALL], truncateds[ALL] = False, done
        return obs, rewards, terminateds, truncateds, {}
