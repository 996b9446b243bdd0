"""A batched env's info dict read as one dict per env, and batched nested observations read as
one structure per env.

Vector envs (Gymnasium's, EnvPool) return one info dict of arrays `[num_envs, ...]`; Gymnasium
marks which envs a key holds a value for with a boolean array under `"_" + key`
(https://gymnasium.farama.org/api/vector/#gymnasium.vector.VectorEnv.step). The sampler reads
infos per env only for callbacks and `output`, so each env's dict is built only when asked for.
"""
from __future__ import annotations

from collections import abc
from typing import Any, Dict, List, Optional

import numpy as np


class InfoRows(abc.Sequence):
    """`info` (a dict of arrays) as a sequence of `num_envs` dicts, each built on access.

    `final` (bool `[num_envs]`): the envs whose row is their `"final_info"` entry, the info of
    the step that ended their episode (a vector env in Gymnasium's same-step autoreset mode
    returns the next episode's reset info beside it)."""

    def __init__(self, info: Dict[str, Any], num_envs: int, final: Optional[np.ndarray] = None) -> None:
        self._info, self._n, self._final = info, num_envs, final

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(f"env index {i} out of range for {self._n} envs")
        return self._row(i % self._n)

    def __iter__(self):
        return (self._row(i) for i in range(self._n))

    def _row(self, i: int) -> Dict[str, Any]:
        row = _info_row(self._info, i, self._n)
        if self._final is not None and self._final[i]:
            return row.get("final_info", row)
        return row


def _info_row(info: Dict[str, Any], i: int, n: int) -> Dict[str, Any]:
    row = {}
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue  # the mask of `key[1:]`
        mask = info.get("_" + key)
        if mask is not None and not mask[i]:
            continue  # env i has no value for this key this step
        row[key] = _info_row(value, i, n) if isinstance(value, dict) else _row(value, i, n)
    return row


def nested_rows(tree: Any, n: int) -> List[Any]:
    """A batched nested observation (dicts / tuples of arrays `[n, ...]`) as `n` structures."""
    return [_row(tree, i, n) for i in range(n)]


def _row(tree: Any, i: int, n: int) -> Any:
    if isinstance(tree, dict):
        return {k: _row(v, i, n) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_row(v, i, n) for v in tree)
    if isinstance(tree, np.ndarray) and tree.ndim and tree.shape[0] == n:
        return tree[i]
    return tree
