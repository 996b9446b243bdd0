"""Curricula: envs whose task can be changed between episodes, and the hook that changes it.

An env that subclasses `TaskSettableEnv` (or only has `get_task` / `set_task`) can be moved
through a curriculum with the `env_task_fn` config key::

    def env_task_fn(train_results, task_settable_env, env_ctx):
        # e.g. the next level once the mean return is high enough
        level = task_settable_env.get_task()
        return level + 1 if train_results["episode_reward_mean"] > 0.8 else level

After each `Trainer.train()` it is called for every sub-env of every rollout worker (the
local one and the remote ones) with that iteration's result dict, the sub-env and its
`EnvContext` (`worker_index`, `vector_index`, `env_config`); a task different from the
current one is passed to `set_task`. The sub-env picks it up at its next reset (an episode
already running keeps the task it started with unless the env decides otherwise).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

import gymnasium as gym

EnvTaskFn = Callable[[dict, Any, Any], Any]


class TaskSettableEnv(gym.Env):
    """An env with a settable task (a level, a goal, a set of parameters).

    Subclasses implement `get_task` and `set_task`; `sample_tasks` is optional (for
    meta-learning style task sampling).
    """

    def sample_tasks(self, n_tasks: int) -> List[Any]:
        """`n_tasks` tasks drawn from the env's task distribution."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample_tasks")

    def get_task(self) -> Any:
        """The task the env runs now."""
        raise NotImplementedError  # abstract

    def set_task(self, task: Any) -> None:
        """Switches the env to `task` (taking effect at the latest at the next reset)."""
        raise NotImplementedError  # abstract


def task_settable(env: Any) -> Optional[Any]:
    """`env`, or the env inside its Gymnasium wrappers, if it has `get_task` and `set_task`;
    else None."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        if candidate is not None and callable(getattr(candidate, "get_task", None)) \
                and callable(getattr(candidate, "set_task", None)):
            return candidate
    return None


def apply_env_task_fn(env_task_fn: EnvTaskFn, train_results: dict, env: Any, env_ctx: Any) -> Any:
    """Calls `env_task_fn(train_results, env, env_ctx)` and sets the task it returns when it
    differs from the env's current one. Returns the env's task afterwards.

    Raises:
        ValueError: naming `env_task_fn` when the env has no `get_task` / `set_task`.
    """
    target = task_settable(env)
    if target is None:
        raise ValueError(
            f"'env_task_fn' is set, but the env {type(env).__name__} has no get_task() / set_task(): subclass "
            "rlfleet.env.TaskSettableEnv (or add both methods), or set env_task_fn None")
    new_task = env_task_fn(train_results, target, env_ctx)
    if new_task != target.get_task():
        target.set_task(new_task)
    return target.get_task()


__all__ = ["TaskSettableEnv", "apply_env_task_fn", "task_settable", "EnvTaskFn"]
