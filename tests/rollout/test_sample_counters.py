"""Per-worker sample accounting: a real worker's handed-out count and the driver's ledger add up."""

from __future__ import annotations

import os

import pytest

from rlfleet.rollout.sample_counters import ReceivedLedger
from tests.envs import CountingEnv, make_worker
from tests.helpers import kill_process, two_worker_ppo


def test_worker_counts_handed_steps_and_ledger_names_the_lost_ones():
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 5}, "rollout_fragment_length": 7})
    try:
        ledger = ReceivedLedger()
        first, second, dropped = w.sample(), w.sample(), w.sample()
        ledger.record(w.worker_index, first)
        ledger.record(w.worker_index, second)  # `dropped` never reaches the driver
        report = w.sample_counter.report()
        assert report["pid"] == os.getpid()
        assert report["handed_batches"] == 3
        assert report["handed_env_steps"] == first.count + second.count + dropped.count == 21
        assert ledger.lost({w.worker_index: report}) == {w.worker_index: dropped.count}
        ledger.record(w.worker_index, dropped)
        ledger.record(w.worker_index, dropped)  # more received than reported: a stale report
        with pytest.raises(ValueError, match="more than the 21"):
            ledger.lost({w.worker_index: report})
    finally:
        w.stop()


def test_counters_add_up_across_a_killed_worker(ray_session, tmp_path):
    """Two Ray workers; worker 1 is SIGKILLed (by the pid it reports) between iterations and
    recreated: what the workers handed out, over both of worker 1's lives, is what the driver
    received (and trained) plus what was lost, and the lost steps are the survivor's."""
    trainer = two_worker_ppo(str(tmp_path), recreate_failed_workers=True)
    try:
        trainer.train()
        reports = {r["worker_index"]: r for r in trainer.workers.foreach_worker(lambda w: w.sample_counter.report())}
        dead = reports[1]
        assert dead["pid"] != os.getpid() and dead["handed_env_steps"] > 0
        kill_process(dead["pid"])
        result = trainer.train()
        after = {r["worker_index"]: r for r in trainer.workers.foreach_worker(lambda w: w.sample_counter.report())}
        assert after[1]["pid"] != dead["pid"]  # recreated: a new process, its counter from zero
        handed = dead["handed_env_steps"] + after[1]["handed_env_steps"] + after[2]["handed_env_steps"]
        ledger = trainer.workers.received
        received = ledger.received
        # The driver trained what it received, but for the health check's probe batch (dropped).
        assert ledger.trained == result["timesteps_total"] == sum(received.values()) - ledger.dropped["health_probe"]
        assert ledger.snapshot(trainer.samples_queued())["unaccounted"] == 0
        lost = trainer.workers.received.lost({1: {"handed_env_steps": dead["handed_env_steps"]
                                                  + after[1]["handed_env_steps"]}, 2: after[2]})
        assert handed == sum(received.values()) + sum(lost.values())
        # Worker 1 died idle: nothing of its own was lost. The survivor's batches of the round
        # that hit the dead worker were dropped with it (a synchronous round is all or nothing).
        assert lost[1] == 0 and lost[2] > 0, (lost, received, dead, after)
    finally:
        trainer.stop()


def test_an_answer_fetched_before_a_dead_workers_error_is_not_lost(ray_session, tmp_path):
    """`ready_results` fetches the finished answers one by one; when a dead worker's error
    comes after a healthy worker's batch, the batch is handed out by the next call instead of
    vanishing with the exception (it was sampled and would never be trained)."""
    from rlfleet.rollout.worker_calls import sample_once

    trainer = two_worker_ppo(str(tmp_path))
    workers = trainer.workers
    try:
        kill_process(workers.foreach_worker(lambda w: w.sample_counter.pid)[2])
        assert workers.submit_async(sample_once) == [1, 2]  # worker 1's request first
        ray_session.wait(list(workers._in_flight), num_returns=2, timeout=60)  # both answered
        with pytest.raises(ray_session.exceptions.RayError):
            workers.ready_results(timeout_s=0)
        assert workers.num_in_flight() == 1
        [(index, batch)] = workers.ready_results(timeout_s=0)
        assert index == 1 and batch.count == 25
    finally:
        trainer.stop()
