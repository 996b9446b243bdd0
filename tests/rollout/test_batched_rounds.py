"""`WorkerSet.sample`: all rounds in one call per remote worker give the same rows, in the
same order, as one call per round (real CartPole envs, real local Ray)."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
from rlfleet.config import merge_configs, validate_config
from rlfleet.env.registry import resolve_env
from rlfleet.rollout.worker_set import WorkerSet

pytestmark = pytest.mark.timeout(300)


def _worker_set(batched: bool, **overrides) -> WorkerSet:
    config = merge_configs(DEFAULT_CONFIG, {
        "env": "CartPole-v1", "num_workers": 2, "num_cpus_per_worker": 0.25, "num_envs_per_worker": 3,
        "rollout_fragment_length": 20, "model": {"fcnet_hiddens": [8]}, "seed": 11, **overrides})
    validate_config(config)
    _, creator = resolve_env("CartPole-v1")
    workers = WorkerSet(env_creator=creator, policy_class=PPOTorchPolicy, trainer_config=config, num_workers=2)
    workers.batched_rounds = batched
    return workers


@pytest.mark.parametrize("overrides", [{}, {"batch_mode": "complete_episodes"}], ids=["truncate", "complete"])
def test_one_call_per_worker_same_rows_as_one_call_per_round(ray_session, overrides):
    out = {}
    for batched in (True, False):
        workers = _worker_set(batched, **overrides)
        try:
            rounds = 0 if overrides else workers._rounds_needed(250)
            # 250 steps: 3 rounds of 2 x 60; then 1 round; then 0 steps asked.
            batches = [workers.sample(250)]
            first, perfs = workers.collect_metrics()  # batched: the metrics came with the samples
            assert len(perfs) == 2 and all(p for p in perfs)
            batches.append(workers.sample(100))
            # Sampling through the handles after a batched sample: those episodes count too.
            ray_session.get([w.sample.remote() for w in workers.remote_workers()])
            second, _ = workers.collect_metrics()
            batches.append(workers.sample(0))
            out[batched] = batches, rounds, workers.batched_rounds, [
                [(e.episode_length, e.episode_reward) for e in eps] for eps in (first, second)]
        finally:
            workers.stop()
    (new, rounds, still_batched, eps_new), (old, _, _, eps_old) = out[True], out[False]
    if not overrides:
        assert rounds == 3 and still_batched
        assert [b.count for b in new] == [360, 120, 0]
    for a, b in zip(new, old):
        assert a.count == b.count and set(a.keys()) == set(b.keys())
        for key in a.keys():
            np.testing.assert_array_equal(a[key], b[key])
    if not overrides:  # rows of worker 1 first in each round of 120 rows
        owners = new[0]["eps_id"] >> 40
        assert list(owners[:60]) == [1] * 60 and list(owners[60:120]) == [2] * 60
    assert eps_new == eps_old and all(len(eps) > 0 for eps in eps_new)
