"""Sampling helpers shared by the algorithms' `training_step`."""
from __future__ import annotations

from rlfleet.policy.sample_batch import SampleBatch


def synchronous_parallel_sample(workers, min_env_steps: int) -> SampleBatch:
    """Samples from the worker set until at least `min_env_steps` steps are gathered
    (`WorkerSet.sample`: remote workers in parallel, batches in worker order).

    Args:
        workers: the WorkerSet.
        min_env_steps: the train batch size to reach.
    """
    return workers.sample(min_env_steps)
