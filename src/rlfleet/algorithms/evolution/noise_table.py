"""The shared noise table: one block of seeded Gaussian noise from which every perturbation
is read as a slice `noise[index : index + dim]`.

Workers never send perturbations, only their start indices (and the returns they earned):
the driver rebuilds each perturbation from the same table. With remote workers the table is
put into Ray's object store once (one put of one float32 array); every worker on a node
maps that one copy read-only (Ray hands NumPy arrays out zero-copy), so the table costs
`noise_size * 4` bytes per node, not per worker.
"""
from __future__ import annotations

import numpy as np

from rlfleet.utils.seeding import derive_seed

# RLlib 1.x's fixed noise seed (`rllib/agents/es/es.py`), used when the config sets no `seed`.
DEFAULT_NOISE_SEED = 123


def make_noise(noise_size: int, seed: int | None) -> np.ndarray:
    """`noise_size` float32 draws of N(0, 1), the same for the same `seed` (None: RLlib
    1.x's fixed seed)."""
    noise_seed = DEFAULT_NOISE_SEED if seed is None else derive_seed(seed, "noise_table")
    return np.random.default_rng(noise_seed).standard_normal(int(noise_size), dtype=np.float32)


class SharedNoiseTable:
    """Read access to the noise block (a NumPy array, possibly a read-only view of Ray's
    object store).

    Args:
        noise: the float32 noise block.
    """

    def __init__(self, noise: np.ndarray):
        self.noise = noise

    def get(self, index: int, dim: int) -> np.ndarray:
        """The perturbation starting at `index` (a view, not a copy)."""
        return self.noise[index:index + dim]

    def sample_indices(self, rng: np.random.Generator, dim: int, count: int) -> np.ndarray:
        """`count` start indices whose slices of length `dim` fit in the table."""
        if dim > len(self.noise):
            raise ValueError(f"noise_size={len(self.noise)} is smaller than the policy's {dim} parameters; raise "
                             f"noise_size to at least {dim} (RLlib 1.x uses 250000000)")
        return rng.integers(0, len(self.noise) - dim + 1, size=count, dtype=np.int64)


__all__ = ["SharedNoiseTable", "make_noise", "DEFAULT_NOISE_SEED"]
