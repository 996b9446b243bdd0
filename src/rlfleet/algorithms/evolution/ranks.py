"""Fitness shaping and the weighted sum of perturbations that estimates the gradient."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from rlfleet.algorithms.evolution.noise_table import SharedNoiseTable


def centered_ranks(returns: np.ndarray) -> np.ndarray:
    """Each entry's rank over the whole array, scaled into [-0.5, 0.5] (Salimans et al. 2017):
    the update then depends on the order of the returns only, not on their scale or outliers.
    Ties take distinct ranks in order of appearance, as in RLlib 1.x's `compute_ranks`."""
    flat = np.asarray(returns, dtype=np.float64).ravel()
    ranks = np.empty(flat.size, dtype=np.float64)
    ranks[flat.argsort(kind="stable")] = np.arange(flat.size)
    if flat.size > 1:
        ranks = ranks / (flat.size - 1) - 0.5
    else:
        ranks[:] = 0.0
    return ranks.reshape(np.shape(returns))


def weighted_noise_sum(weights: np.ndarray, indices: Iterable[int], noise: SharedNoiseTable, dim: int,
                       batch_size: int = 500) -> np.ndarray:
    """`sum_i weights[i] * noise.get(indices[i], dim)`, `batch_size` slices at a time: one
    float32 matrix product per batch (the table's precision; 4x faster than converting the
    slices to float64), summed in float64."""
    weights = np.asarray(weights, dtype=np.float32)
    indices = np.asarray(list(indices), dtype=np.int64)
    total = np.zeros(dim, dtype=np.float64)
    for start in range(0, len(indices), batch_size):
        block = np.stack([noise.get(int(i), dim) for i in indices[start:start + batch_size]])
        total += weights[start:start + batch_size] @ block
    return total


__all__ = ["centered_ranks", "weighted_noise_sum"]
