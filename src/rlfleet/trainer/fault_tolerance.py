"""What a trainer does when a remote worker dies (or raises) during `train()`, as in
RLlib 1.x (`rllib/agents/trainer.py`): with `recreate_failed_workers` it is replaced (same
worker index; the current policies, policy mapping, weights and filters), with
`ignore_worker_failures` it is dropped and training goes on with the others, with neither
`WorkerFailureError` is raised."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple, TypeVar

from rlfleet.rollout.worker_set import WorkerSet
from rlfleet.utils.ray_utils import is_worker_failure

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How often one train() call recovers from remote worker failures before giving up (RLlib 1.x's
# value: more failures in a row point to a persistent cluster problem, not a flaky worker).
MAX_WORKER_FAILURE_RETRIES = 3
# Failures one train() call recovers from at most, progress or not (a bound, so that workers
# that keep dying after some progress cannot hold train() forever).
MAX_WORKER_FAILURES_PER_CALL = 16


class WorkerFailureError(RuntimeError):
    """A remote worker died (or raised) during train() and the config does not allow
    going on without it."""


@dataclass(frozen=True)
class FailurePolicy:
    """What a trainer does when a remote worker fails, from `ignore_worker_failures` and
    `recreate_failed_workers`; the rollout workers' recovery below and ES/ARS's perturbation
    pool both follow it, with the same messages. Build it when a failure happens (a running
    trainer's config may have changed since setup)."""

    ignore: bool
    recreate: bool

    @classmethod
    def from_config(cls, config: dict) -> "FailurePolicy":
        return cls(ignore=bool(config["ignore_worker_failures"]), recreate=bool(config["recreate_failed_workers"]))

    def check_tolerated(self, who: str, error: BaseException) -> None:
        """Raises `WorkerFailureError` (from `error`) when `who` (e.g. "A remote worker") may
        not fail: neither option is set."""
        if not (self.ignore or self.recreate):
            raise WorkerFailureError(
                f"{who} failed during train(): {error}\nTo go on without it set 'ignore_worker_failures': True; "
                "to replace it with a new worker set 'recreate_failed_workers': True.") from error

    def replace(self, what: str, failed: Sequence[int], healthy_left: int) -> bool:
        """For the `what` workers `failed`, already removed: True to recreate them, False to go
        on with the `healthy_left` others.

        Raises:
            WorkerFailureError: none is left and none is recreated.
        """
        if self.recreate:
            logger.warning("Recreating %s worker(s) %s", what, list(failed))
            return True
        if healthy_left == 0:
            raise WorkerFailureError(f"No healthy {what} worker is left (worker(s) {list(failed)} failed); cannot "
                                     "continue. Set 'recreate_failed_workers': True to replace failed workers.")
        logger.warning("Going on without %s worker(s) %s", what, list(failed))
        return False


def run_with_recovery(attempt: Callable[[], T], config: dict, recover: Callable[[], None],
                      undo: Callable[[], None], progress: Optional[Callable[[], int]] = None) -> T:
    """`attempt()`, run again after `undo()` and `recover()` each time a remote worker fails
    in it, up to `MAX_WORKER_FAILURE_RETRIES` times in a row.

    "In a row" means without progress in between: when `progress()` (e.g. the env steps
    sampled so far) grew since the last failure, the workers recovered and trained before the
    next one died, and the count starts again (under frequent preemptions each failure is a
    new one, not a persistent fault). `MAX_WORKER_FAILURES_PER_CALL` bounds them all the same.
    A worker that dies while `recover()` runs (e.g. a replacement killed as it starts) counts
    as one more failure: the next attempt meets it, and the next recovery replaces it.

    Raises:
        WorkerFailureError: the config allows no recovery, or workers kept failing.
    """
    in_a_row, last_progress = 0, progress() if progress is not None else None
    for tries in range(1, 1 + MAX_WORKER_FAILURES_PER_CALL):
        try:
            return attempt()
        except Exception as e:
            if not is_worker_failure(e):
                raise
            undo()
            FailurePolicy.from_config(config).check_tolerated("A remote worker", e)
            now = progress() if progress is not None else None
            in_a_row = 1 if now is not None and now != last_progress else in_a_row + 1
            last_progress = now
            if in_a_row >= 1 + MAX_WORKER_FAILURE_RETRIES:
                break
            logger.warning("A remote worker failed during train() (%d in a row, of %d allowed); recovering: %s",
                           in_a_row, 1 + MAX_WORKER_FAILURE_RETRIES, str(e).splitlines()[0])
            try:
                recover()
            except Exception as again:
                if not is_worker_failure(again):
                    raise
                logger.warning("A remote worker failed while recovering; the next attempt recovers again: %s",
                               str(again).splitlines()[0])
    raise WorkerFailureError(f"train() failed {in_a_row} times in a row ({tries} in all) because remote workers kept "
                             "failing; see the warnings above")


def recover_workers(worker_sets: Sequence[Tuple[str, Optional[WorkerSet]]], config: dict,
                    from_worker, global_vars: Optional[dict] = None) -> None:
    """Health-checks the remote workers of each `(name, worker_set)`, drops the failed ones
    and, with `recreate_failed_workers`, starts replacements with `from_worker`'s weights and
    filters (`WorkerSet.recreate_workers`).

    Raises:
        WorkerFailureError: no healthy remote worker of a set is left and none is recreated.
    """
    policy = FailurePolicy.from_config(config)
    for name, worker_set in worker_sets:
        if worker_set is None or not worker_set.remote_workers():
            continue
        failed = worker_set.remove_unhealthy_workers()
        if failed and policy.replace(f"remote {name}", failed, worker_set.num_remote_workers()):
            worker_set.recreate_workers(failed, from_worker=from_worker, global_vars=global_vars)


__all__ = ["FailurePolicy", "MAX_WORKER_FAILURE_RETRIES", "MAX_WORKER_FAILURES_PER_CALL", "WorkerFailureError", "recover_workers", "run_with_recovery"]
