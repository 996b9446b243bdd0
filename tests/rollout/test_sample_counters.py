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
