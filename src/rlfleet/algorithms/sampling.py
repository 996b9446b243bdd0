"""Sampling helpers shared by the on-policy algorithms' `training_step`."""
from __future__ import annotations

from typing import List

from rlfleet.policy.sample_batch import SampleBatch


def synchronous_parallel_sample(workers, min_env_steps: int) -> SampleBatch:
    """Samples from the worker set until at least `min_env_steps` steps are gathered.

    Without remote workers the local worker samples. With remote workers, each round asks
    every remote worker for one batch in parallel (`ray.get([w.sample.remote() ...])`); the
    batches are concatenated in worker order, not in the order they arrive, so a seeded run
    repeats exactly.

    Args:
        workers: the WorkerSet.
        min_env_steps: the train batch size to reach.
    """
    remote = workers.remote_workers()
    batches: List[SampleBatch] = []
    steps = 0
    if not remote:
        local = workers.local_worker()
        while steps < min_env_steps:
            batch = local.sample()
            steps += batch.count
            batches.append(batch)
        return SampleBatch.concat_samples(batches)
    from rlfleet.utils.ray_utils import import_ray

    ray = import_ray()
    while steps < min_env_steps:
        for batch in ray.get([w.sample.remote() for w in remote]):
            steps += batch.count
            batches.append(batch)
    return SampleBatch.concat_samples(batches)
