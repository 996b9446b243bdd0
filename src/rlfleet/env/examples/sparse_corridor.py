"""A single-player task with one sparse reward and a known optimum, whose position can be saved
and restored (`get_state()` / `set_state(state)`): a test bed for tree search with ranked
rewards (AlphaZero; Laterre et al. 2018, arXiv:1807.01672).

The agent starts at cell 0 of a corridor of `length` cells and must reach the last one within
`horizon` steps. Actions: 0 step back, 1 step forward, 2 jump two cells forward (masked off
where it would leave the corridor: the observation is a Dict with an `"action_mask"`). The only
reward comes when the episode ends: `horizon - steps taken` on reaching the goal, 0 otherwise.
The optimum takes every jump it can, `ceil((length - 1) / 2)` steps: with the defaults (10
cells, horizon 20) a return of 15 (`SparseCorridorEnv.optimal_return()`). A uniformly random
legal-move player averages about 7.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

BACK, FORWARD, JUMP = 0, 1, 2


class SparseCorridorEnv(gym.Env):
    """The corridor (see the module doc). `config`: `length` (>= 3), `horizon` (>= length)."""

    def __init__(self, config: Optional[dict] = None) -> None:
        config = dict(config or {})
        self.length = int(config.pop("length", 10))
        self.horizon = int(config.pop("horizon", 20))
        if config:
            raise ValueError(f"SparseCorridorEnv: unknown env_config options {sorted(config)}; it takes "
                             "'length' and 'horizon'")
        if self.length < 3 or self.horizon < self.length:
            raise ValueError(f"SparseCorridorEnv: needs length >= 3 and horizon >= length, got length "
                             f"{self.length}, horizon {self.horizon}")
        self.observation_space = gym.spaces.Dict({
            "observation": gym.spaces.Box(0.0, 1.0, (self.length + 1,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (3,), np.int8),
        })
        self.action_space = gym.spaces.Discrete(3)
        self.position, self.steps = 0, 0

    def optimal_return(self) -> float:
        """The best return there is: the horizon less the fewest steps to the goal."""
        return float(self.horizon - math.ceil((self.length - 1) / 2))

    # --- search hooks ------------------------------------------------------------------
    def get_state(self) -> Tuple[int, int]:
        return self.position, self.steps

    def set_state(self, state: Tuple[int, int]) -> Dict[str, np.ndarray]:
        """Restores a `get_state()` position; returns its observation."""
        self.position, self.steps = int(state[0]), int(state[1])
        return self._obs()

    # --- the task -----------------------------------------------------------------------
    def _obs(self) -> Dict[str, np.ndarray]:
        cells = np.zeros(self.length + 1, np.float32)
        cells[self.position] = 1.0
        cells[-1] = self.steps / self.horizon  # time matters: the reward shrinks with every step
        mask = np.array([1, 1, int(self.position + 2 < self.length)], np.int8)
        return {"observation": cells, "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self._obs(), {}

    def step(self, action: Any):
        action = int(action)
        if action not in (BACK, FORWARD, JUMP) or (action == JUMP and self.position + 2 >= self.length):
            raise ValueError(f"SparseCorridorEnv.step: action {action} is not allowed at cell {self.position} "
                             "(the action_mask lists the legal ones)")
        self.position = max(0, self.position + (-1, 1, 2)[action])
        self.steps += 1
        reached = self.position == self.length - 1
        terminated = reached
        truncated = not reached and self.steps >= self.horizon
        reward = float(self.horizon - self.steps) if reached else 0.0
        return self._obs(), reward, terminated, truncated, {}


__all__ = ["SparseCorridorEnv"]
