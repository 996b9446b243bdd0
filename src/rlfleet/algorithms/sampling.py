"""Sampling helpers shared by the on-policy algorithms' `training_step`."""
from __future__ import annotations

from typing import List

from rlfleet.policy.sample_batch import SampleBatch


def synchronous_parallel_sample(workers, min_env_steps: int) -> SampleBatch:
    """Samples from the worker set until at least `min_env_steps` steps are gathered.

    Args:
        workers: the WorkerSet (remote workers sample in parallel once they exist).
        min_env_steps: the train batch size to reach.
    """
    local = workers.local_worker()
    batches: List[SampleBatch] = []
    steps = 0
    while steps < min_env_steps:
        batch = local.sample()
        steps += batch.count
        batches.append(batch)
    return SampleBatch.concat_samples(batches)
