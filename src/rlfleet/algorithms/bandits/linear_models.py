"""Disjoint linear reward models, one per arm, updated online (Li et al. 2010, "A
Contextual-Bandit Approach to Personalized News Article Recommendation").

Arm `k` keeps the ridge-regression statistics of the contexts `x` it was pulled on:
`A_k = lambda_ I + sum x x^T` and `b_k = sum r x`; its reward estimate is
`theta_k = A_k^-1 b_k`. The inverse is kept directly and updated per observation with the
Sherman-Morrison identity, `(A + x x^T)^-1 = A^-1 - (A^-1 x)(A^-1 x)^T / (1 + x^T A^-1 x)`,
so an update costs O(d^2) and never inverts a matrix.

Scores for a batch of contexts, one per arm:
- `ucb_scores`: `theta_k . x + alpha * sqrt(x^T A_k^-1 x)` (LinUCB);
- `thompson_scores`: `theta~_k . x` with `theta~_k ~ N(theta_k, v^2 A_k^-1)` (LinTS, Agrawal
  & Goyal 2013: the Gaussian posterior of a ridge regression with noise scale `v`);
- `mean_scores`: `theta_k . x` (greedy, what `explore=False` acts on).
"""
from __future__ import annotations

from typing import Dict

import numpy as np


class DisjointLinearModels:
    """`num_arms` ridge regressions over `dim` context features.

    Args:
        num_arms: the number of arms (a Discrete action space's `n`).
        dim: the number of context features.
        lambda_: the ridge prior's precision (`A_k` starts as `lambda_ I`).
    """

    def __init__(self, num_arms: int, dim: int, lambda_: float = 1.0):
        self.num_arms, self.dim = int(num_arms), int(dim)
        self.a_inv = np.repeat(np.eye(self.dim)[None] / float(lambda_), self.num_arms, axis=0)
        self.b = np.zeros((self.num_arms, self.dim))
        self.counts = np.zeros(self.num_arms, np.int64)

    def theta(self) -> np.ndarray:
        """The reward estimates `[num_arms, dim]`."""
        return np.einsum("kij,kj->ki", self.a_inv, self.b)

    def mean_scores(self, contexts: np.ndarray) -> np.ndarray:
        """`[B, num_arms]` estimated rewards of each arm for each context."""
        return contexts @ self.theta().T

    def ucb_scores(self, contexts: np.ndarray, alpha: float) -> np.ndarray:
        """`[B, num_arms]` upper confidence bounds: estimate plus `alpha` standard deviations."""
        width = np.sqrt(np.maximum(np.einsum("bi,kij,bj->bk", contexts, self.a_inv, contexts), 0.0))
        return self.mean_scores(contexts) + alpha * width

    def thompson_scores(self, contexts: np.ndarray, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        """`[B, num_arms]` rewards under `theta`s drawn from the posterior (its standard
        deviations times `scale`), one draw per row."""
        # A_k^-1 stays symmetric positive definite under Sherman-Morrison; the tiny jitter
        # absorbs round-off after many updates.
        chol = np.linalg.cholesky(self.a_inv + 1e-12 * np.eye(self.dim))
        noise = rng.standard_normal((len(contexts), self.num_arms, self.dim))
        thetas = self.theta()[None] + scale * np.einsum("kij,bkj->bki", chol, noise)
        return np.einsum("bki,bi->bk", thetas, contexts)

    def update(self, contexts: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Adds observations `(x, arm, r)` row by row (Sherman-Morrison on the arm's inverse)."""
        for x, arm, r in zip(contexts, arms.astype(np.int64), rewards):
            a_inv_x = self.a_inv[arm] @ x
            self.a_inv[arm] -= np.outer(a_inv_x, a_inv_x) / (1.0 + x @ a_inv_x)
            self.b[arm] += r * x
            self.counts[arm] += 1

    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"a_inv": self.a_inv.copy(), "b": self.b.copy(), "counts": self.counts.copy()}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        for name in ("a_inv", "b", "counts"):
            mine, given = getattr(self, name), np.asarray(arrays[name])
            if given.shape != mine.shape:
                raise ValueError(f"linear bandit weights {name!r}: shape {given.shape} does not fit this "
                                 f"policy's {mine.shape} ({self.num_arms} arms x {self.dim} features)")
            setattr(self, name, given.astype(mine.dtype, copy=True))


__all__ = ["DisjointLinearModels"]
