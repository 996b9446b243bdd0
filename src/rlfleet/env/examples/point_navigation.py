"""A meta-learning task family: 2-D point navigation with a hidden goal per task.

The 2-D navigation benchmark of Finn et al. 2017 (MAML, arXiv 1703.03400, section 5.2): a
point starts at the origin and moves by its (clipped) action each step; the reward is minus
its distance to the task's goal, which the observation does not show. One policy cannot
serve every goal, so a policy that adapts to the goal from a few episodes of reward does
better than any fixed one: what MAML is meant to learn.
"""
from __future__ import annotations

from typing import Any, List, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.task_settable import TaskSettableEnv

GOAL_SAMPLING = ("circle", "square")


class PointNavigationEnv(TaskSettableEnv):
    """Move a point from the origin towards a hidden goal; reward = -distance to the goal.

    Observation: the position (x, y). Action: a Box in [-1, 1]^2, scaled by `max_step` (and
    clipped to it) as the step taken. An episode lasts `horizon` steps (truncated, never
    terminated: the reward already says how close the point is).

    A task is a goal `(gx, gy)`. `sample_tasks(n)` draws goals from the env's RNG (seeded by
    `reset(seed=...)`): on the circle of radius `goal_radius` ("circle": the direction is all
    there is to learn) or uniform in the square `[-goal_radius, goal_radius]^2` ("square", as
    the MAML paper). `set_task` takes effect at the next reset.

    env_config keys: `goal` (the first task, default `(goal_radius, 0)`), `goal_sampling`
    ("circle" or "square", default "circle"), `goal_radius` (default 1.0), `max_step`
    (default 0.1), `horizon` (default 20).
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        self.goal_sampling = cfg.get("goal_sampling", "circle")
        if self.goal_sampling not in GOAL_SAMPLING:
            raise ValueError(f"PointNavigationEnv: goal_sampling {self.goal_sampling!r} is not one of {GOAL_SAMPLING}")
        self.goal_radius = float(cfg.get("goal_radius", 1.0))
        self.max_step = float(cfg.get("max_step", 0.1))
        self.horizon = int(cfg.get("horizon", 20))
        if self.goal_radius <= 0 or self.max_step <= 0 or self.horizon < 1:
            raise ValueError("PointNavigationEnv: goal_radius and max_step must be > 0 and horizon >= 1, got "
                             f"{self.goal_radius}, {self.max_step}, {self.horizon}")
        bound = self.goal_radius + self.max_step * self.horizon
        self.observation_space = gym.spaces.Box(-bound, bound, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._next_goal = self._goal = np.array([self.goal_radius, 0.0])
        self.set_task(cfg.get("goal", (self.goal_radius, 0.0)))
        self._goal = self._next_goal
        self._pos = np.zeros(2)
        self._t = 0

    # --- TaskSettableEnv -------------------------------------------------------------
    def sample_tasks(self, n_tasks: int) -> List[np.ndarray]:
        if self.goal_sampling == "circle":
            angles = self.np_random.uniform(0.0, 2.0 * np.pi, n_tasks)
            goals = self.goal_radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
        else:
            goals = self.np_random.uniform(-self.goal_radius, self.goal_radius, (n_tasks, 2))
        return [g for g in goals]

    def get_task(self) -> np.ndarray:
        # The goal set last: the one the next episode runs.
        return self._next_goal.copy()

    def set_task(self, task: Any) -> None:
        goal = np.asarray(task, dtype=np.float64)
        if goal.shape != (2,) or not np.all(np.isfinite(goal)):
            raise ValueError(f"PointNavigationEnv: a task is a goal (x, y) of two finite numbers, got {task!r}")
        self._next_goal = goal.copy()

    @property
    def goal(self) -> np.ndarray:
        """The goal of the running episode."""
        return self._goal.copy()

    # --- gym.Env -----------------------------------------------------------------------
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._goal = self._next_goal
        self._pos = np.zeros(2)
        self._t = 0
        return self._pos.astype(np.float32), {}

    def step(self, action):
        move = np.clip(np.asarray(action, dtype=np.float64).reshape(2), -1.0, 1.0) * self.max_step
        self._pos = self._pos + move
        self._t += 1
        reward = -float(np.linalg.norm(self._pos - self._goal))
        return self._pos.astype(np.float32), reward, False, self._t >= self.horizon, {}


__all__ = ["PointNavigationEnv", "GOAL_SAMPLING"]
