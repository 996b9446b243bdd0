"""Sum- and min-segment trees over a fixed number of leaves, vectorised in NumPy.

A tree of capacity C (rounded up to a power of two) is one flat array of 2C nodes: node 1
is the root, node i has children 2i and 2i+1, leaves sit at [C, 2C). Every operation
takes a whole batch of indices or query values and walks the tree level by level, so a
batch costs log2(C) NumPy calls, never one Python step per item.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def _last_occurrence(idx: np.ndarray, values: np.ndarray):
    """Drops repeated indices, keeping the value written last (the sequential semantics)."""
    rev_unique, rev_pos = np.unique(idx[::-1], return_index=True)
    keep = len(idx) - 1 - rev_pos
    return rev_unique, values[keep]


class SegmentTree:
    """A complete binary tree whose inner nodes hold `op` of their children.

    Args:
        capacity: number of leaves needed (rounded up to a power of two).
        op: a vectorised binary reduction, e.g. `np.add` or `np.minimum`.
        neutral: the identity of `op` (the value of an empty leaf).
    """

    def __init__(self, capacity: int, op: Callable[[np.ndarray, np.ndarray], np.ndarray], neutral: float):
        if capacity < 1:
            raise ValueError(f"segment tree capacity must be >= 1, got {capacity}")
        size = 1
        while size < capacity:
            size *= 2
        self.capacity = size
        self.op = op
        self.neutral = float(neutral)
        self.tree = np.full(2 * size, self.neutral, dtype=np.float64)

    def __setitem__(self, idx, values) -> None:
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), idx.shape)
        if len(idx) > 1:
            idx, values = _last_occurrence(idx, values)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.capacity):
            raise IndexError(f"leaf index out of range [0, {self.capacity})")
        tree = self.tree
        nodes = idx + self.capacity
        tree[nodes] = values
        # Recompute the touched ancestors level by level. A parent listed twice gets the
        # same value twice (its children are final by then), so no dedup is needed.
        while nodes[0] > 1:
            nodes = nodes >> 1
            tree[nodes] = self.op(tree[2 * nodes], tree[2 * nodes + 1])

    def __getitem__(self, idx) -> np.ndarray:
        return self.tree[np.asarray(idx, dtype=np.int64) + self.capacity]

    def reduce(self) -> float:
        """`op` over all leaves (the root)."""
        return float(self.tree[1])

    def leaves(self, n: int) -> np.ndarray:
        """The first `n` leaf values (a copy)."""
        return self.tree[self.capacity:self.capacity + n].copy()

    def set_leaves(self, values: np.ndarray) -> None:
        """Replaces all leaves at once (the rest become neutral) and rebuilds every node."""
        values = np.asarray(values, dtype=np.float64)
        if len(values) > self.capacity:
            raise ValueError(f"{len(values)} leaves do not fit a tree of capacity {self.capacity}")
        tree = self.tree
        tree[:] = self.neutral
        tree[self.capacity:self.capacity + len(values)] = values
        lo = self.capacity
        while lo > 1:
            lo //= 2
            nodes = np.arange(lo, 2 * lo)
            tree[nodes] = self.op(tree[2 * nodes], tree[2 * nodes + 1])


class SumTree(SegmentTree):
    """Leaves hold priorities; the root holds their sum; sampling by prefix sums."""

    def __init__(self, capacity: int):
        super().__init__(capacity, np.add, 0.0)

    def sum(self) -> float:
        return self.reduce()

    def find_prefixsum_idx(self, prefix_sums: np.ndarray) -> np.ndarray:
        """For each value v, the smallest leaf i with sum(leaves[:i+1]) > v.

        All queries descend together: one vectorised step per tree level.

        Args:
            prefix_sums: values in [0, sum()).

        Returns:
            Leaf indices (int64), same shape as `prefix_sums`.
        """
        v = np.array(prefix_sums, dtype=np.float64, copy=True).reshape(-1)
        tree = self.tree
        node = np.ones(len(v), dtype=np.int64)
        if len(node) == 0:
            return node.reshape(np.shape(prefix_sums))
        while node[0] < self.capacity:
            left = 2 * node
            left_sum = tree[left]
            # Never step into an all-empty right subtree: rounding can leave v a hair
            # above the left sum at the very end of the occupied range.
            go_right = (v >= left_sum) & (tree[left + 1] > 0.0)
            v -= np.where(go_right, left_sum, 0.0)
            node = left + go_right
        return (node - self.capacity).reshape(np.shape(prefix_sums))


class MinTree(SegmentTree):
    """Leaves hold priorities; the root holds their minimum (empty leaves are +inf)."""

    def __init__(self, capacity: int):
        super().__init__(capacity, np.minimum, float("inf"))

    def min(self) -> float:
        return self.reduce()
