"""IMPALA's mixed-in replay (`replay_proportion`, `replay_buffer_num_slots`): each new sample
batch goes to the learner with, on average, `replay_proportion` earlier ones drawn again."""
from __future__ import annotations

from typing import Any, List

import numpy as np


class MixInReplay:
    """Keeps the last `num_slots` sample batches and, for each new one, returns it plus on
    average `replay_proportion` batches drawn uniformly from the kept ones."""

    def __init__(self, num_slots: int, replay_proportion: float, rng: np.random.Generator):
        self.slots: List[Any] = []
        self.num_slots, self.proportion, self.rng = int(num_slots), float(replay_proportion), rng
        self.next = 0

    def add_and_replay(self, batch: Any) -> List[Any]:
        out = [batch]
        if self.num_slots <= 0 or self.proportion <= 0:
            return out
        k = int(self.proportion) + int(self.rng.random() < self.proportion - int(self.proportion))
        if self.slots:
            out += [self.slots[i] for i in self.rng.integers(0, len(self.slots), size=k)]
        if len(self.slots) < self.num_slots:
            self.slots.append(batch)
        else:
            self.slots[self.next] = batch
            self.next = (self.next + 1) % self.num_slots
        return out


__all__ = ["MixInReplay"]
