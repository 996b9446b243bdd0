"""Per-worker sample accounting: a real worker's handed-out count and the driver's ledger add up."""

from __future__ import annotations

import os

import pytest

from rlfleet.rollout.sample_counters import ReceivedLedger
from tests.envs import CountingEnv, make_worker


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
    import signal
    import time

    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
        "num_workers": 2, "num_cpus_per_worker": 0.25, "rollout_fragment_length": 25, "train_batch_size": 100,
        "sgd_minibatch_size": 50, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "seed": 3,
        "recreate_failed_workers": True})
    try:
        trainer.train()
        reports = {r["worker_index"]: r for r in trainer.workers.foreach_worker(lambda w: w.sample_counter.report())}
        dead = reports[1]
        assert dead["pid"] != os.getpid() and dead["handed_env_steps"] > 0
        os.kill(dead["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the kill lands asynchronously
            try:
                os.kill(dead["pid"], 0)
                time.sleep(0.1)
            except ProcessLookupError:
                break
        result = trainer.train()
        after = {r["worker_index"]: r for r in trainer.workers.foreach_worker(lambda w: w.sample_counter.report())}
        assert after[1]["pid"] != dead["pid"]  # recreated: a new process, its counter from zero
        handed = dead["handed_env_steps"] + after[1]["handed_env_steps"] + after[2]["handed_env_steps"]
        received = trainer.workers.received.received
        assert sum(received.values()) == result["timesteps_total"]  # the driver trained what it received
        lost = trainer.workers.received.lost({1: {"handed_env_steps": dead["handed_env_steps"]
                                                  + after[1]["handed_env_steps"]}, 2: after[2]})
        assert handed == sum(received.values()) + sum(lost.values())
        # Worker 1 died idle: nothing of its own was lost. The survivor's batches of the round
        # that hit the dead worker were dropped with it (a synchronous round is all or nothing).
        assert lost[1] == 0 and lost[2] > 0, (lost, received, dead, after)
    finally:
        trainer.stop()
