"""The newest self-play moves, which train batches are drawn from: a first-in first-out window
of `capacity` rows kept as NumPy columns (saved whole in checkpoints)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch


class ReplayWindow:
    """The last `capacity` rows added (columns as in the batches added)."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.columns: Dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def add(self, batch: SampleBatch) -> None:
        for key in batch.keys():
            new = np.asarray(batch[key])
            old = self.columns.get(key)
            joined = new if old is None else np.concatenate([old, new])
            self.columns[key] = joined[-self.capacity:]

    def sample(self, rows: int, rng: np.random.Generator) -> SampleBatch:
        """`rows` rows drawn uniformly (all of them, shuffled, when the window holds fewer)."""
        size = len(self)
        index = rng.permutation(size) if size <= rows else rng.choice(size, rows, replace=False)
        return SampleBatch({key: column[index] for key, column in self.columns.items()})

    def get_state(self) -> Dict[str, Any]:
        return {key: column.copy() for key, column in self.columns.items()}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.columns = {key: np.asarray(column) for key, column in state.items()}


__all__ = ["ReplayWindow"]
