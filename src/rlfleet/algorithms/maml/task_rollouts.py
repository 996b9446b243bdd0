"""What a sampling worker does for MAML: per task, set the task on its sub-envs, sample with
the meta-policy, adapt, sample again (`inner_adaptation_steps` times), and hand every batch
back. The same functions run on the local worker (local mode) and, through `apply`, on
remote workers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Sequence

import numpy as np

from rlfleet.env.task_settable import TaskSettableEnv
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from rlfleet.rollout.postprocessing import standardized

SB = SampleBatch


@dataclass
class TaskRollout:
    """One task's batches, in sampling order: `batches[0]` pre-adaptation, `batches[i]` after
    `i` inner steps; `returns[i]` the returns of the episodes in `batches[i]`; `episodes` the
    worker's metrics of every episode that finished meanwhile (restarting episodes between
    stages would drop them: they travel here to the trainer's results instead)."""

    task: Any
    batches: List[SampleBatch]
    returns: List[np.ndarray]
    episodes: List[Any]


def meta_env(env: Any) -> Any:
    """`env` (or the env inside its Gymnasium wrappers) when it has MAML's task hooks.

    Raises:
        ValueError: naming `sample_tasks(n)` and `set_task(task)` when the env lacks either
            (`TaskSettableEnv`'s own `sample_tasks` only raises, so it counts as missing).
    """
    for candidate in (env, getattr(env, "unwrapped", None)):
        if candidate is None:
            continue
        sample = getattr(type(candidate), "sample_tasks", None)
        if callable(sample) and sample is not TaskSettableEnv.sample_tasks \
                and callable(getattr(candidate, "set_task", None)):
            return candidate
    raise ValueError(
        f"MAML needs an env with a task family: sample_tasks(n) (n tasks drawn from the env's task "
        f"distribution) and set_task(task); {type(env).__name__} lacks them. Subclass "
        "rlfleet.env.TaskSettableEnv and implement both (e.g. "
        "rlfleet.env.examples.point_navigation:PointNavigationEnv)")


def episode_returns(batch: SampleBatch) -> np.ndarray:
    """The return of each episode in `batch` (complete episodes: `batch_mode` is
    "complete_episodes"), in order of first appearance."""
    eps = np.asarray(batch[SB.EPS_ID])
    if eps.size == 0:
        return np.zeros(0)
    _, first, inverse = np.unique(eps, return_index=True, return_inverse=True)
    sums = np.bincount(inverse.reshape(-1), weights=np.asarray(batch[SB.REWARDS], dtype=np.float64))
    return sums[np.argsort(first)]


def _set_task(worker, task: Any) -> None:
    try:
        worker.foreach_env(lambda env: meta_env(env).set_task(task))
    except ValueError as e:
        raise ValueError(f"MAML sets each task on the workers' sub-envs: {e}") from e


def _restart(worker, episodes: List[Any]) -> None:
    """Drops the episodes in flight (begun under the previous task or weights): the next
    sample resets every sub-env. The finished episodes' metrics, which a restart forgets,
    are moved to `episodes` first."""
    episodes.extend(worker.get_metrics())
    worker.restart_episodes(None)


def rollout_task(worker, task: Any, inner_steps: int) -> TaskRollout:
    """Samples `task` pre-adaptation and after each of `inner_steps` adaptation steps; the
    worker's policy has its meta weights back afterwards. Advantages come standardised per
    batch (the adaptation step and the meta loss read the same numbers)."""
    policy = worker.get_policy(DEFAULT_POLICY_ID)
    meta_weights = policy.get_weights()
    _set_task(worker, task)
    batches, returns, episodes = [], [], []
    try:
        for step in range(inner_steps + 1):
            _restart(worker, episodes)  # every episode of a batch runs one task and one policy
            batch = worker.sample().as_multi_agent().policy_batches[DEFAULT_POLICY_ID]
            batch[SB.ADVANTAGES] = standardized(np.asarray(batch[SB.ADVANTAGES]))
            batches.append(batch)
            returns.append(episode_returns(batch))
            if step < inner_steps:
                policy.adapt_in_place(batch)
        episodes.extend(worker.get_metrics())
    finally:
        policy.set_weights(meta_weights)
    return TaskRollout(task, batches, returns, episodes)


def rollout_tasks(worker, tasks: Sequence[Any], inner_steps: int) -> List[TaskRollout]:
    """`rollout_task` for each of `tasks` in turn."""
    return [rollout_task(worker, task, inner_steps) for task in tasks]


__all__ = ["TaskRollout", "episode_returns", "meta_env", "rollout_task", "rollout_tasks"]
