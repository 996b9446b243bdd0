"""`run_with_recovery`: a worker that dies while the trainer recovers from an earlier failure
(the chaos benchmark killed replacements as they started) is one more failure, not the end
of training."""

from __future__ import annotations

import pytest

from rlfleet.trainer.fault_tolerance import MAX_WORKER_FAILURE_RETRIES, WorkerFailureError, run_with_recovery

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
