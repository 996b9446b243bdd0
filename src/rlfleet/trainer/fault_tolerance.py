"""What a trainer does when a remote worker dies (or raises) during `train()`, as the
reference: with `recreate_failed_workers` it is replaced (same worker index; the current
policies, policy mapping, weights and filters), with `ignore_worker_failures` it is dropped
and training goes on with the others, with neither `WorkerFailureError` is raised."""
from __future__ import annotations

import logging
from typing import Callable, Optional, Sequence, Tuple, TypeVar

from rlfleet.rollout.worker_set import WorkerSet
from rlfleet.utils.ray_utils import is_worker_failure

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How often one train() call recovers from remote worker failures before giving up (as
# the reference).
MAX_WORKER_FAILURE_RETRIES = 3


class WorkerFailureError(RuntimeError):
    """A remote worker died (or raised) during train() and the config does not allow
    going on without it."""


def run_with_recovery(attempt: Callable[[], T], config: dict, recover: Callable[[], None],
                      undo: Callable[[], None]) -> T:
    """`attempt()`, run again after `undo()` and `recover()` each time a remote worker fails
    in it, up to `MAX_WORKER_FAILURE_RETRIES` times.

    Raises:
        WorkerFailureError: the config allows no recovery, or workers kept failing.
    """
    for tries in range(1, 2 + MAX_WORKER_FAILURE_RETRIES):
        try:
            return attempt()
        except Exception as e:
            if not is_worker_failure(e):
                raise
            undo()
            if not (config["ignore_worker_failures"] or config["recreate_failed_workers"]):
                raise WorkerFailureError(
                    f"A remote worker failed during train(): {e}\nTo go on without it set "
                    "'ignore_worker_failures': True; to replace it with a new worker set "
                    "'recreate_failed_workers': True."
                ) from e
            logger.warning("A remote worker failed during train() (attempt %d of %d); recovering: %s",
                           tries, 1 + MAX_WORKER_FAILURE_RETRIES, str(e).splitlines()[0])
            recover()
    raise WorkerFailureError(f"train() failed {1 + MAX_WORKER_FAILURE_RETRIES} times in a row because "
                             "remote workers kept failing; see the warnings above")


def recover_workers(worker_sets: Sequence[Tuple[str, Optional[WorkerSet]]], config: dict,
                    from_worker, global_vars: Optional[dict] = None) -> None:
    """Health-checks the remote workers of each `(name, worker_set)`, drops the failed ones
    and, with `recreate_failed_workers`, starts replacements with `from_worker`'s weights and
    filters (`WorkerSet.recreate_workers`).

    Raises:
        WorkerFailureError: no healthy remote worker of a set is left and none is recreated.
    """
    for name, worker_set in worker_sets:
        if worker_set is None or not worker_set.remote_workers():
            continue
        failed = worker_set.remove_unhealthy_workers()
        if not failed:
            continue
        if config["recreate_failed_workers"]:
            logger.warning("Recreating %s worker(s) %s", name, failed)
            worker_set.recreate_workers(failed, from_worker=from_worker, global_vars=global_vars)
        elif not worker_set.remote_workers():
            raise WorkerFailureError(
                f"No healthy remote {name} worker is left (worker(s) {failed} failed); cannot continue. "
                "Set 'recreate_failed_workers': True to replace failed workers."
            )


__all__ = ["MAX_WORKER_FAILURE_RETRIES", "WorkerFailureError", "recover_workers", "run_with_recovery"]
