"""A curriculum example: a corridor whose length doubles with each task level."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.task_settable import TaskSettableEnv


class CurriculumCorridorEnv(TaskSettableEnv):
    """Walk right to the end of a corridor of `3 * 2**level` cells (actions: 0 left, 1 right)
    within `4 * length` steps for a reward of 1 (0 otherwise). The observation is the
    position as a fraction of the length and the level as a fraction of the top level.

    Random play rarely reaches the end of a long corridor, so starting at the top level
    learns slowly; raising the level as returns rise (`env_task_fn`, e.g.
    `corridor_curriculum`) learns each length on the way. A new level takes effect at the
    next reset.

    env_config keys: `level` (the starting level, default 0), `max_level` (default 4).
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        self.max_level = int(cfg.get("max_level", 4))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._level = self._pending_level = 0
        self.set_task(cfg.get("level", 0))
        self._level = self._pending_level
        self._pos = 0
        self._t = 0

    # --- TaskSettableEnv -------------------------------------------------------------
    def get_task(self) -> int:
        # The level set last: the one the next episode runs.
        return self._pending_level

    def set_task(self, task: Any) -> None:
        level = int(task)
        if not 0 <= level <= self.max_level:
            raise ValueError(f"CurriculumCorridorEnv: task {task!r} is not a level in [0, {self.max_level}]")
        self._pending_level = level

    def sample_tasks(self, n_tasks: int):
        return [int(x) for x in self.np_random.integers(0, self.max_level + 1, n_tasks)]

    @property
    def level(self) -> int:
        """The level of the running episode."""
        return self._level

    @property
    def length(self) -> int:
        return 3 * 2 ** self._level

    # --- gym.Env -----------------------------------------------------------------------
    def _obs(self) -> np.ndarray:
        return np.array([self._pos / self.length, self._level / max(self.max_level, 1)], np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._level = self._pending_level
        self._pos, self._t = 0, 0
        return self._obs(), {"level": self._level}

    def step(self, action: Any):
        self._pos = max(0, self._pos + (1 if int(action) == 1 else -1))
        self._t += 1
        reached = self._pos >= self.length
        truncated = not reached and self._t >= 4 * self.length
        return self._obs(), float(reached), reached, truncated, {"level": self._level}


def corridor_curriculum(train_results: dict, task_settable_env: CurriculumCorridorEnv, env_ctx) -> int:
    """`env_task_fn` for `CurriculumCorridorEnv`: one level up once the iteration's mean
    return reaches 0.9 (the level stays otherwise)."""
    level = task_settable_env.get_task()
    if train_results.get("episode_reward_mean", 0.0) >= 0.9:
        return min(level + 1, task_settable_env.max_level)
    return level


__all__ = ["CurriculumCorridorEnv", "corridor_curriculum"]
