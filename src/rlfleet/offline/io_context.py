"""IOContext: what an input reader or output writer creator is given; `SamplerInput`, the
worker's own env sampler as a reader; `ReportsEpisodes`, a reader that also reports episodes."""
from __future__ import annotations

from typing import Any, List, Optional, Protocol, runtime_checkable


class SamplerInput:
    """The env sampler as a reader: `next()` samples one batch."""

    def __init__(self, sampler):
        self.sampler = sampler

    def next(self) -> Any:
        return self.sampler.sample()


@runtime_checkable
class ReportsEpisodes(Protocol):
    """An input reader whose batches come with the metrics of their episodes (e.g. a policy
    server's: its clients played them); the worker reports them as its own."""

    def pop_metrics(self) -> List[Any]:
        """The metrics (`RolloutMetrics`) of the episodes behind the batches read since the last call."""


@runtime_checkable
class ClosableReader(Protocol):
    """An input reader holding something to release when its worker stops (a server socket)."""

    def close(self) -> None:
        """Releases it."""


class IOContext:
    """The context of one worker's offline input or output.

    Args:
        log_dir: where `output: "logdir"` writes (the trainer's results folder), or None.
        config: the worker's config.
        worker_index: 0 for the local worker, 1.. for remote ones.
        worker: the RolloutWorker (None in tests that build readers alone).

    Attributes:
        input_config: `config["input_config"]`: options for a custom reader.
    """

    def __init__(self, log_dir: Optional[str] = None, config: Optional[dict] = None, worker_index: int = 0,
                 worker: Any = None):
        self.log_dir = log_dir
        self.config = dict(config or {})
        self.worker_index = int(worker_index)
        self.worker = worker

    @property
    def input_config(self) -> dict:
        return dict(self.config.get("input_config") or {})

    @property
    def num_workers(self) -> int:
        # Without a worker (an IOContext built for reading files alone) the config says it.
        workers = self.worker.num_workers if self.worker is not None else self.config.get("num_workers", 0)
        return int(workers or 0)

    def default_sampler_input(self):
        """The worker's env sampler as a reader (`next()` samples one batch)."""
        return SamplerInput(self.worker.sampler.env_sampler())
