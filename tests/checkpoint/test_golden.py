"""Golden checkpoints (tests/data/golden_checkpoints/, written by
benchmarks/make_golden_checkpoints.py): every registered algorithm's checkpoint of every format
loads with today's code, acts on the recorded observations as it did when it was written, and
trains on. Those that need a Ray cluster are marked slow; every family keeps a fast case."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.checkpoint import FORMAT_VERSION, read_manifest
from rlfleet.registry import list_algorithms
from rlfleet.trainer import Trainer
from tests.golden_cases import (
    DIST_INPUTS, FAMILIES, GOLDEN_ROOT, NEEDS_RAY, SLOW, act, checkpoint_of, folder_bytes, from_json, golden_cases, leaves,
    read_golden,
)

CASES = [pytest.param(algo, case, id=f"{case.parent.name}-{algo}", marks=pytest.mark.slow if algo in SLOW else ())
         for algo, case in golden_cases()]
# Learning happens in a thread for the asynchronous learners: a few iterations until it has.
MAX_ITERATIONS = 10


def test_every_registered_algorithm_has_a_golden_checkpoint_of_the_current_format():
    current = GOLDEN_ROOT / f"format_{FORMAT_VERSION}"
    assert sorted(p.name for p in current.iterdir() if p.is_dir()) == list_algorithms(), (
        "run benchmarks/make_golden_checkpoints.py to add the missing algorithms' golden checkpoints")
    assert sorted(a for members in FAMILIES.values() for a in members) == list_algorithms()
    assert all(set(members) - SLOW for members in FAMILIES.values()), "every family needs a case in the fast suite"
    assert folder_bytes(GOLDEN_ROOT) < 5 * 1024 ** 2  # they live in the repository: keep them tiny


def _assert_same(recorded, actual, where):
    for want, got in zip(leaves(recorded), leaves(actual)):
        assert got.shape == want.shape, where
        if np.issubdtype(want.dtype, np.floating):
            # Another CPU or BLAS build may change the last bits of a float; a format break
            # (weights, filters or spaces read wrong) changes them by far more.
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("algo,case", CASES)
def test_a_golden_checkpoint_loads_acts_as_recorded_and_trains_on(algo, case, tmp_path, request):
    if algo in NEEDS_RAY:
        request.getfixturevalue("ray_session")
    golden = read_golden(case)
    path = checkpoint_of(case)
    manifest = read_manifest(str(path))
    assert golden["algorithm"] == manifest["algorithm"] == algo
    trainer = Trainer.from_checkpoint(str(path), logdir=str(tmp_path))
    try:
        assert trainer.iteration == golden["iteration"]
        assert sorted(golden["policies"]) == sorted(manifest["policies"])
        for pid, rec in golden["policies"].items():
            actions, outputs = act(trainer, pid, [from_json(o) for o in rec["observations"]])
            assert len(actions) == len(rec["actions"]) > 0 and len(outputs) == len(rec[DIST_INPUTS])
            for i, (want, got) in enumerate(zip(rec["actions"] + rec[DIST_INPUTS], actions + outputs)):
                _assert_same(from_json(want), got, f"{algo} policy {pid!r}, recorded value {i}")
        # Trains on from where the checkpoint left off.
        trained_before = manifest["counters"]["num_env_steps_trained"]
        result = trainer.train()
        assert result["training_iteration"] == golden["iteration"] + 1
        assert result["timesteps_total"] > manifest["counters"]["num_env_steps_sampled"]
        while result["num_env_steps_trained"] == trained_before and result["training_iteration"] < MAX_ITERATIONS:
            result = trainer.train()
        assert result["num_env_steps_trained"] > trained_before, f"{algo} did not train after restoring"
    finally:
        trainer.stop()
