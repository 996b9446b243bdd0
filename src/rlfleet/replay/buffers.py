"""Replay buffers: a uniform ring buffer and a proportional prioritized one.

Storage is column-wise: one preallocated array per column, `[capacity, ...]`, created on
the first `add` from that batch's dtypes and shapes. Adding a fragment writes all its rows
with one fancy-indexed assignment per column; sampling gathers with one take per column.
No per-transition Python objects exist anywhere.

Prioritized replay follows Schaul et al. 2016 ("Prioritized Experience Replay"),
proportional variant: P(i) = p_i^alpha / sum_j p_j^alpha, importance weights
w_i = (N * P(i))^-beta / max_j w_j.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay.segment_tree import MinTree, SumTree

# Columns added to sampled batches.
BATCH_INDEXES = "batch_indexes"
PRIO_WEIGHTS = "weights"

_DATA_PREFIX = "data/"


class ReplayBuffer:
    """A FIFO ring buffer of transitions, sampled uniformly with replacement.

    Args:
        capacity: the most transitions kept; the oldest are overwritten first.
        seed: seed of the buffer's own NumPy generator (None: nondeterministic).
    """

    def __init__(self, capacity: int, *, seed: Optional[int] = None):
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError(f"replay buffer capacity must be an int >= 1, got {capacity!r}")
        self.capacity = capacity
        self.rng = np.random.default_rng(seed)
        self._storage: Dict[str, np.ndarray] = {}
        self._next = 0  # where the next row goes
        self._size = 0
        self.num_added = 0  # transitions ever added
        self.num_sampled = 0  # transitions ever sampled

    def __len__(self) -> int:
        return self._size

    @property
    def columns(self) -> Sequence[str]:
        return tuple(self._storage)

    # --- adding ------------------------------------------------------------------
    def _allocate(self, batch: SampleBatch) -> None:
        self._storage = {
            key: np.zeros((self.capacity, *value.shape[1:]), dtype=value.dtype) for key, value in batch.items()
        }

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Stores every row of `batch` (one transition per row).

        Args:
            batch: rows with the same columns (and per-row shapes) on every call.

        Returns:
            The slots the rows went to (a batch larger than the buffer keeps its last
            `capacity` rows).
        """
        n = batch.count
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if not self._storage:
            self._allocate(batch)
        elif set(batch) != set(self._storage):
            raise ValueError(f"replay buffer columns are {sorted(self._storage)}; the batch added has "
                             f"{sorted(batch)}")
        skip = max(0, n - self.capacity)
        slots = (self._next + np.arange(n - skip)) % self.capacity
        for key, store in self._storage.items():
            value = batch[key]
            if value.shape[1:] != store.shape[1:]:
                raise ValueError(f"replay buffer column {key!r} holds rows of shape {store.shape[1:]}; "
                                 f"the batch added has {value.shape[1:]}")
            if value.dtype.kind == "S" and value.itemsize > store.itemsize:
                # LZ4-compressed observations (compress_observations) vary in width: widen the
                # column (with headroom) rather than let NumPy silently truncate the rows.
                store = self._storage[key] = store.astype(f"S{value.itemsize + value.itemsize // 4}")
            store[slots] = value[skip:]
        self._next = int((self._next + n - skip) % self.capacity)
        self._size = min(self.capacity, self._size + n - skip)
        self.num_added += n
        self._on_added(slots)
        return slots

    def _on_added(self, slots: np.ndarray) -> None:
        """Hook for subclasses: `slots` were just (over)written."""

    # --- sampling ----------------------------------------------------------------
    def _gather(self, idx: np.ndarray) -> SampleBatch:
        out = SampleBatch({key: store[idx] for key, store in self._storage.items()})
        out[BATCH_INDEXES] = idx
        self.num_sampled += len(idx)
        return out

    def sample(self, num_items: int, **kwargs) -> SampleBatch:
        """`num_items` transitions drawn uniformly with replacement.

        Returns:
            A SampleBatch of the stored columns plus `batch_indexes` (the slots) and
            `weights` (all ones, so that losses can weight uniformly).
        """
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = self.rng.integers(0, self._size, size=int(num_items))
        out = self._gather(idx)
        out[PRIO_WEIGHTS] = np.ones(len(idx), dtype=np.float32)
        return out

    def update_priorities(self, idx: np.ndarray, priorities: np.ndarray) -> None:
        """Uniform replay has no priorities: a no-op, so callers need not check."""

    def stats(self) -> Dict[str, Any]:
        return {"capacity": self.capacity, "size": self._size, "num_added": self.num_added,
                "num_sampled": self.num_sampled}

    # --- state -------------------------------------------------------------------
    def get_state(self) -> Dict[str, Any]:
        """The buffer as NumPy arrays (`data/<column>`, the first `len(self)` slots) and
        JSON-serialisable scalars; no pickle needed to store it (e.g. in an `.npz`)."""
        state: Dict[str, Any] = {
            "type": type(self).__name__,
            "capacity": self.capacity,
            "size": self._size,
            "next_index": self._next,
            "num_added": self.num_added,
            "num_sampled": self.num_sampled,
            "rng_state": json.dumps(self.rng.bit_generator.state),
        }
        for key, store in self._storage.items():
            state[_DATA_PREFIX + key] = store[:self._size].copy()
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        """Restores what `get_state` returned (the capacity must match)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"replay buffer state has capacity {int(state['capacity'])}; this buffer has "
                             f"{self.capacity}")
        size = int(state["size"])
        self._storage = {}
        for key, value in state.items():
            if key.startswith(_DATA_PREFIX):
                value = np.asarray(value)
                store = np.zeros((self.capacity, *value.shape[1:]), dtype=value.dtype)
                store[:size] = value
                self._storage[key[len(_DATA_PREFIX):]] = store
        self._size = size
        self._next = int(state["next_index"])
        self.num_added = int(state.get("num_added", size))
        self.num_sampled = int(state.get("num_sampled", 0))
        if state.get("rng_state"):
            self.rng.bit_generator.state = json.loads(str(state["rng_state"]))


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay over a sum-tree (sampling) and a min-tree (weights).

    Args:
        capacity: the most transitions kept.
        alpha: how much prioritization is used (0: uniform, 1: fully proportional).
        seed: seed of the buffer's own NumPy generator.
    """

    def __init__(self, capacity: int, *, alpha: float = 0.6, seed: Optional[int] = None):
        super().__init__(capacity, seed=seed)
        if not alpha >= 0:
            raise ValueError(f"'prioritized_replay_alpha': {alpha!r} must be >= 0")
        self.alpha = float(alpha)
        self._sum = SumTree(self.capacity)
        self._min = MinTree(self.capacity)
        self._max_priority = 1.0

    def _on_added(self, slots: np.ndarray) -> None:
        # New transitions get the highest priority seen so far: each is replayed at least
        # once soon after it arrives.
        p = self._max_priority ** self.alpha
        self._sum[slots] = p
        self._min[slots] = p

    def sample(self, num_items: int, beta: float = 0.4, **kwargs) -> SampleBatch:
        """`num_items` transitions drawn with probability proportional to priority^alpha.

        Args:
            num_items: how many (with replacement).
            beta: importance-sampling exponent (0: no correction, 1: full).

        Returns:
            The stored columns plus `batch_indexes` and `weights` (importance weights,
            normalised so the largest possible weight is 1).
        """
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if not beta >= 0:
            raise ValueError(f"prioritized replay beta must be >= 0, got {beta!r}")
        total = self._sum.sum()
        mass = self.rng.random(int(num_items)) * total
        idx = np.minimum(self._sum.find_prefixsum_idx(mass), self._size - 1)
        out = self._gather(idx)
        out[PRIO_WEIGHTS] = self.importance_weights(idx, beta)
        return out

    def importance_weights(self, idx: np.ndarray, beta: float) -> np.ndarray:
        """(N * P(i))^-beta / (N * P_min)^-beta for the slots `idx`."""
        total = self._sum.sum()
        n = self._size
        p_min = self._min.min() / total
        max_weight = (p_min * n) ** (-beta)
        p = self._sum[idx] / total
        return ((p * n) ** (-beta) / max_weight).astype(np.float32)

    def update_priorities(self, idx: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities (e.g. |TD error| + eps) of the slots `idx`.

        Raises:
            ValueError: for a priority that is not > 0 or not finite.
        """
        idx = np.asarray(idx, dtype=np.int64)
        priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if len(idx) != len(priorities):
            raise ValueError(f"{len(idx)} indexes but {len(priorities)} priorities")
        if len(idx) == 0:
            return
        if not np.all(np.isfinite(priorities)) or priorities.min() <= 0:
            raise ValueError(f"priorities must be finite and > 0, got min {priorities.min()!r}, "
                             f"max {priorities.max()!r}")
        if idx.min() < 0 or idx.max() >= self._size:
            raise IndexError(f"priority index out of range [0, {self._size})")
        p = priorities ** self.alpha
        self._sum[idx] = p
        self._min[idx] = p
        self._max_priority = max(self._max_priority, float(priorities.max()))

    def priorities(self) -> np.ndarray:
        """priority^alpha of each stored transition (slot order)."""
        return self._sum.leaves(self._size)

    def stats(self) -> Dict[str, Any]:
        out = super().stats()
        out["max_priority"] = self._max_priority
        return out

    def get_state(self) -> Dict[str, Any]:
        state = super().get_state()
        state["alpha"] = self.alpha
        state["max_priority"] = self._max_priority
        state["priorities"] = self.priorities()
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        self._max_priority = float(state.get("max_priority", 1.0))
        prios = np.asarray(state["priorities"], dtype=np.float64)
        old_alpha = float(state.get("alpha", self.alpha))
        if old_alpha != self.alpha:
            # Stored values are priority^old_alpha: re-express them under this alpha (with
            # old_alpha 0 the priorities are lost; start them all at the maximum).
            prios = (prios ** (self.alpha / old_alpha) if old_alpha > 0
                     else np.full_like(prios, self._max_priority ** self.alpha))
        self._sum.set_leaves(prios)
        self._min.set_leaves(prios)
