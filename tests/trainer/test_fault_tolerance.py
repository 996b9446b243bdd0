"""`run_with_recovery`: a worker that dies while the trainer recovers from an earlier failure
(the chaos benchmark killed replacements as they started) is one more failure, not the end
of training."""

from __future__ import annotations

import pytest

from rlfleet.trainer.fault_tolerance import MAX_WORKER_FAILURE_RETRIES, WorkerFailureError, run_with_recovery
from tests.helpers import kill_process, two_worker_ppo

CONFIG = {"ignore_worker_failures": False, "recreate_failed_workers": True}


def _worker_died() -> Exception:
    ray = pytest.importorskip("ray")
    return ray.exceptions.RayError("the worker process died")


def test_a_failure_while_recovering_is_recovered_from_on_the_next_attempt():
    calls = {"attempt": 0, "recover": 0, "undo": 0}

    def attempt():
        calls["attempt"] += 1
        if calls["attempt"] <= 2:  # the first failure, then the replacement killed during recovery
            raise _worker_died()
        return "result"

    def recover():
        calls["recover"] += 1
        if calls["recover"] == 1:
            raise _worker_died()

    assert run_with_recovery(attempt, CONFIG, recover, lambda: calls.__setitem__("undo", calls["undo"] + 1)) == "result"
    assert calls == {"attempt": 3, "recover": 2, "undo": 2}


def test_recovery_still_gives_up_and_other_errors_still_raise():
    def always_fails():
        raise _worker_died()

    def recover_fails():
        raise _worker_died()

    with pytest.raises(WorkerFailureError, match=f"{1 + MAX_WORKER_FAILURE_RETRIES} times"):
        run_with_recovery(always_fails, CONFIG, recover_fails, lambda: None)

    def recover_breaks():
        raise KeyError("not a worker failure")

    with pytest.raises(KeyError):
        run_with_recovery(always_fails, CONFIG, recover_breaks, lambda: None)


def test_failures_with_progress_in_between_are_not_in_a_row_but_stay_bounded():
    """Workers preempted one after another, each after the recovered set sampled a little,
    do not end training; the per-call bound still ends it."""
    from rlfleet.trainer.fault_tolerance import MAX_WORKER_FAILURES_PER_CALL

    sampled = {"steps": 0, "attempts": 0}
    failures = MAX_WORKER_FAILURE_RETRIES + 3  # more than the budget of failures in a row

    def attempt():
        sampled["attempts"] += 1
        if sampled["attempts"] <= failures:
            sampled["steps"] += 50  # some sampling, then the next worker dies
            raise _worker_died()
        return "result"

    assert run_with_recovery(attempt, CONFIG, lambda: None, lambda: None, progress=lambda: sampled["steps"]) == "result"
    # Without progress the same failures are in a row: training gives up after the budget.
    sampled["attempts"] = 0
    with pytest.raises(WorkerFailureError, match=f"{1 + MAX_WORKER_FAILURE_RETRIES} times in a row"):
        run_with_recovery(attempt, CONFIG, lambda: None, lambda: None, progress=lambda: 0)
    sampled["attempts"], failures = 0, 10 * MAX_WORKER_FAILURES_PER_CALL
    with pytest.raises(WorkerFailureError, match=f"{MAX_WORKER_FAILURES_PER_CALL} in all"):
        run_with_recovery(attempt, CONFIG, lambda: None, lambda: None, progress=lambda: sampled["steps"])


def test_a_worker_dead_at_a_checkpoint_is_replaced_not_fatal(ray_session, tmp_path):
    """`rlfleet train` saves with `continue_from_checkpoint` (every worker takes the state read
    back): a worker that died since the last iteration used to end the run there."""
    import os

    trainer = two_worker_ppo(str(tmp_path), recreate_failed_workers=True)
    try:
        trainer.train()
        pid = trainer.workers.foreach_worker(lambda w: w.sample_counter.pid)[1]
        kill_process(pid)
        path = trainer.save(continue_from_checkpoint=True)
        assert os.path.isdir(path)
        pids = trainer.workers.foreach_worker(lambda w: w.sample_counter.pid)
        assert len(pids) == 3 and pid not in pids  # replaced
        assert trainer.train()["training_iteration"] == 2
    finally:
        trainer.stop()
