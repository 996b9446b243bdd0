"""One iteration's worth of perturbation results: which tasks to hand out (directions
drawn from the noise table by the driver, so that a failed worker's task can be re-issued
as is) and the answers gathered."""
from __future__ import annotations

from typing import Callable, List, Optional

import numpy as np

from rlfleet.algorithms.evolution.noise_table import SharedNoiseTable
from rlfleet.algorithms.evolution.rollouts import RolloutResult, RolloutTask


# The share of a step budget that the tasks running when it is reached may add, all workers
# together: a `timesteps_total` stop overshoots by about this much (plus one direction each).
BUDGET_SHARE = 0.05


class Collection:
    """Hands out tasks of `directions_per_task` directions until `enough(self)` holds or
    `max_directions` were handed out; keeps the answers.

    Each task also runs unperturbed evaluation episodes of the current `theta`: its share of
    `min_evals` (spread over the first `spread` tasks, one round of the workers, so that they
    run in parallel; whatever is still owed when the directions are done goes out as one
    evaluation-only task), plus one more per direction with probability `eval_prob`.

    Args:
        noise: the noise table the directions are drawn from.
        dim: the number of parameters (the length of a direction).
        rng: the driver's generator (direction indices and evaluation draws).
        directions_per_task: directions per task (the last task may have fewer).
        eval_prob: the chance that a slot is an evaluation episode.
        enough: stops handing out tasks once it returns True (checked on answers received).
        max_directions: the most directions handed out in total (None: no limit).
        step_budget: env steps this iteration may sample before a stop on the run's step
            count (`Trainer.steps_left()`; None: no limit). Once the answers reach it no more
            directions go out; tasks start at one direction and are sized from the answers' steps
            per direction to at most `BUDGET_SHARE / workers` of the budget, so the
            tasks still running when it is reached add at most that share.
        workers: the workers sharing the tasks (to size them against `step_budget`).
        min_evals: the evaluation episodes every iteration runs at least.
        spread: over how many tasks `min_evals` is spread (the workers sharing the work).
    """

    def __init__(self, noise: SharedNoiseTable, dim: int, rng: np.random.Generator, directions_per_task: int,
                 eval_prob: float, enough: Callable[["Collection"], bool], max_directions: Optional[int] = None,
                 step_budget: Optional[int] = None, workers: int = 1, min_evals: int = 0, spread: int = 1):
        self._noise, self._dim, self._rng = noise, dim, rng
        self._per_task, self._eval_prob = max(1, int(directions_per_task)), float(eval_prob)
        self._enough, self._max = enough, max_directions
        self._budget, self._workers = step_budget, max(1, int(workers))
        self._evals_owed = int(min_evals)
        self._evals_per_task = -(-int(min_evals) // max(1, int(spread)))
        self._issued = 0
        self._tasks = 0
        self.results: List[RolloutResult] = []

    def next_task(self) -> Optional[RolloutTask]:
        if self._enough(self) or (self._max is not None and self._issued >= self._max) or self._budget_spent():
            if not self._evals_owed:
                return None
            # The directions are done but not the evaluations owed: one task runs them all.
            count, evals = 0, self._evals_owed
        else:
            count = self._per_task if self._max is None else min(self._per_task, self._max - self._issued)
            if self._budget is not None:
                count = min(count, self._directions_within_budget())
            last = self._max is not None and self._issued + count >= self._max
            evals = self._evals_owed if last else min(self._evals_owed, self._evals_per_task)
        self._evals_owed -= evals
        self._issued += count
        if self._eval_prob > 0 and count:
            evals += int(self._rng.binomial(count, self._eval_prob))
        self._tasks += 1
        return RolloutTask(self._tasks, self._noise.sample_indices(self._rng, self._dim, count), evals)

    def _budget_spent(self) -> bool:
        # Never before an answer: an iteration always has something to learn from.
        return self._budget is not None and bool(self.results) and self.steps >= self._budget

    def _directions_within_budget(self) -> int:
        answered = sum(len(r.indices) for r in self.results)
        if not answered:
            return 1  # steps per direction unknown yet: the first tasks measure it
        steps_per_direction = max(1.0, self.steps / answered)
        task_steps = BUDGET_SHARE * self._budget / self._workers
        return max(1, int(task_steps / steps_per_direction))

    def add(self, result: RolloutResult) -> None:
        self.results.append(result)

    # --- the gathered answers --------------------------------------------------------
    def _cat(self, name: str, empty_shape: tuple, dtype) -> np.ndarray:
        parts = [getattr(r, name) for r in self.results]
        return np.concatenate(parts) if parts else np.zeros(empty_shape, dtype)

    @property
    def indices(self) -> np.ndarray:
        return self._cat("indices", (0,), np.int64)

    @property
    def returns(self) -> np.ndarray:
        """`[N, 2]`: the returns of `(+eps, -eps)` per direction."""
        return self._cat("returns", (0, 2), np.float64)

    @property
    def lengths(self) -> np.ndarray:
        return self._cat("lengths", (0, 2), np.int64)

    @property
    def eval_returns(self) -> np.ndarray:
        return self._cat("eval_returns", (0,), np.float64)

    @property
    def eval_lengths(self) -> np.ndarray:
        return self._cat("eval_lengths", (0,), np.int64)

    @property
    def noisy_episodes(self) -> int:
        return 2 * sum(len(r.indices) for r in self.results)

    @property
    def noisy_steps(self) -> int:
        return int(sum(r.lengths.sum() for r in self.results))

    @property
    def steps(self) -> int:
        return int(sum(r.steps for r in self.results))


__all__ = ["Collection"]
