"""Samplers the config swaps in: `fake_sampler` and `sample_collector`.

`fake_sampler: True`: sample once, then serve that same batch forever (learner benchmarks).

With the envs out of the loop, `train()` measures the learner alone: every iteration learns
on a copy of the first batch the worker's real sampler collected (a copy, so a learner that
adds or rewrites columns in place never changes what the next iteration gets). No episodes
finish after the first batch, so the episode metrics stop moving; evaluation
(`sample_episodes`) still runs real episodes through the real sampler.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.sampler_api import Sampler, SamplerSettings


class FakeSampler:
    """A `Sampler` that re-serves the first batch of the sampler it wraps.

    Args:
        inner: the real sampler (collects the first batch; runs evaluation episodes).
    """

    def __init__(self, inner: Sampler):
        self.inner = inner
        self._batch: Optional[Union[SampleBatch, MultiAgentBatch]] = None
        self.served = 0  # batches handed out so far, the first (real) one included

    @property
    def settings(self) -> SamplerSettings:
        return self.inner.settings

    @property
    def steps_since_sync(self) -> int:
        return self.inner.steps_since_sync

    @steps_since_sync.setter
    def steps_since_sync(self, value: int) -> None:
        self.inner.steps_since_sync = value

    @property
    def metrics(self) -> List[RolloutMetrics]:
        return self.inner.metrics

    @metrics.setter
    def metrics(self, value: List[RolloutMetrics]) -> None:
        self.inner.metrics = value

    def sample(self) -> Union[SampleBatch, MultiAgentBatch]:
        if self._batch is None:
            self._batch = self.inner.sample()
        self.served += 1
        return self._batch.copy()

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        return self.inner.sample_episodes(num_episodes)

    def pop_metrics(self) -> List[RolloutMetrics]:
        return self.inner.pop_metrics()

    def perf_stats(self) -> Dict[str, float]:
        return self.inner.perf_stats()

    def restart(self) -> None:
        self.inner.restart()

    def get_state(self) -> Dict[str, Any]:
        return self.inner.get_state()

    def set_state(self, state: Dict[str, Any]) -> None:
        self.inner.set_state(state)

    def __getattr__(self, name: str) -> Any:
        # Anything sampler-specific (e.g. the vectorised sampler's `policy`, `metrics`) is the inner one's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def custom_sampler(collector: Any, worker: Any, settings: SamplerSettings) -> Sampler:
    """The sampler of `sample_collector`: a class (or a `"module:Class"` path) implementing
    `rlfleet.rollout.sampler_api.Sampler`, built as `cls(worker=worker, settings=settings)`;
    it reaches the worker's envs, policies, preprocessors and filters through `worker`.

    Raises:
        ValueError: naming `sample_collector` when it is not such a class.
    """
    cls = collector
    if isinstance(collector, str):
        from rlfleet.utils.json_codec import import_callable

        cls = import_callable(collector, "sample_collector")
    if not isinstance(cls, type):
        raise ValueError(f"'sample_collector': {collector!r} is not a class; give a class implementing "
                         "rlfleet.rollout.sampler_api.Sampler (or its 'module:Class' path), or None for the "
                         "built-in samplers")
    sampler = cls(worker=worker, settings=settings)
    if not isinstance(sampler, Sampler):
        missing = [name for name in ("sample", "sample_episodes", "pop_metrics", "perf_stats", "restart",
                                     "get_state", "set_state", "settings", "steps_since_sync")
                   if not hasattr(sampler, name)]
        raise ValueError(f"'sample_collector': {cls.__name__} does not implement the Sampler protocol "
                         f"(rlfleet.rollout.sampler_api.Sampler); it lacks {missing}")
    return sampler


__all__ = ["FakeSampler", "custom_sampler"]
