"""The in-process worker pool keeps the Ray pool's order and interface, and one FailurePolicy
decides (and words) what a worker failure does for rollout and perturbation workers alike."""
from __future__ import annotations

import logging

import pytest

from rlfleet.trainer.fault_tolerance import FailurePolicy, WorkerFailureError
from rlfleet.rollout.worker_pools import InProcessActorPool, InProcessWorkerPool, RemoteWorkerPool, worker_pool


class _Worker:
    def __init__(self):
        self.calls, self.global_vars = [], None

    def set_global_vars(self, global_vars):
        self.global_vars = global_vars


class _Counter:
    def __init__(self, start):
        self.value = start

    def add(self, k):
        self.value += k
        return self.value

    def fail(self):
        raise ZeroDivisionError("boom")


def test_in_process_requests_run_one_at_a_time_when_their_answer_is_asked_for():
    worker = _Worker()
    pool = InProcessWorkerPool(worker)
    assert pool.in_process
    assert pool.submit(lambda w, x: w.calls.append(x) or x * 2, 5, max_in_flight=3) == [0]
    assert pool.submit(lambda w: 0, max_in_flight=3) == []  # one worker: one request pending at most
    assert worker.calls == []  # not run yet
    assert pool.ready_results(timeout_s=0.0) == [(0, 10)] and worker.calls == [5]
    assert pool.ready_results(timeout_s=0.0) == []
    # The worker acts with the learner's own weights: nothing is sent, the global vars are set.
    assert pool.sync_worker(0, lambda: pytest.fail("weights were fetched"), {"timestep": 7}) is False
    assert worker.global_vars == {"timestep": 7}


def test_in_process_requests_run_under_the_lock():
    events = []

    class Lock:
        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc):
            events.append("exit")

    pool = InProcessWorkerPool(_Worker(), Lock())
    pool.submit(lambda w: events.append("run"))
    pool.ready_results()
    assert events == ["enter", "run", "exit"]


def test_in_process_actors_answer_at_once_and_raise_at_get():
    pool = InProcessActorPool()
    (counter,) = pool.start_actors(_Counter, [(1,)], num_cpus=0.5)
    assert isinstance(counter, _Counter)  # the object itself
    first, second = pool.call(counter, "add", 2), pool.call(counter, "add", 3)
    assert counter.value == 6  # run in call order, when called
    assert pool.wait([first, second], timeout_s=None, num_returns=1) == ([first], [second])
    assert pool.get([first, second]) == [3, 6]
    failed = pool.call(counter, "fail")
    with pytest.raises(ZeroDivisionError, match="boom"):
        pool.get([failed])
    assert pool.get([pool.put("table")]) == ["table"]
    assert pool.foreach([counter], lambda c: c.value) == [6]
    # What a worker function holds: `handle.<method>.remote(...)`, looked up at call time.
    (handle,) = pool.as_handles([counter])
    counter.add = lambda k: "replaced"
    assert pool.get([handle.add.remote(1)]) == ["replaced"]


def test_the_pool_is_chosen_from_the_workers():
    class Workers:
        def __init__(self, remote):
            self.remote = remote

        def remote_workers(self):
            return self.remote

        def local_worker(self):
            return "local"

    assert isinstance(worker_pool(Workers([])), InProcessWorkerPool)
    assert worker_pool(Workers([])).worker == "local"
    remote = worker_pool(Workers(["handle"]))
    assert isinstance(remote, RemoteWorkerPool) and not remote.in_process


def test_failure_policy_refuses_names_both_options_and_replaces_or_drops(caplog):
    strict = FailurePolicy.from_config({"ignore_worker_failures": False, "recreate_failed_workers": False})
    cause = RuntimeError("died")
    with pytest.raises(WorkerFailureError) as info:
        strict.check_tolerated("Perturbation worker 2", cause)
    message = str(info.value)
    assert message.startswith("Perturbation worker 2 failed during train(): died")
    assert "'ignore_worker_failures': True" in message and "'recreate_failed_workers': True" in message
    assert info.value.__cause__ is cause

    recreate = FailurePolicy(ignore=False, recreate=True)
    recreate.check_tolerated("A remote worker", cause)  # tolerated: no error
    assert recreate.replace("remote rollout", [1], healthy_left=0) is True

    ignore = FailurePolicy(ignore=True, recreate=False)
    with caplog.at_level(logging.WARNING, logger="rlfleet.trainer.fault_tolerance"):
        assert ignore.replace("perturbation", [1], healthy_left=1) is False
    assert "Going on without perturbation worker(s) [1]" in caplog.text
    with pytest.raises(WorkerFailureError, match=r"No healthy remote rollout worker is left \(worker\(s\) \[1, 3\]"):
        ignore.replace("remote rollout", [1, 3], healthy_left=0)
