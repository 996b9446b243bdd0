"""The preprocessors of the structured spaces: Tuple and Dict observations flattened into one
float32 vector, each component by its own preprocessor (chosen by `get_preprocessor`, so
nesting works to any depth), in `gymnasium.spaces.flatten`'s order."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlfleet.models.preprocessor_base import Preprocessor, describe_observation, flat_view
from rlfleet.models.space_preprocessors import NoPreprocessor


class _FlatteningPreprocessor(Preprocessor):
    """Shared code of Tuple/Dict: children flattened and concatenated into one float32 vector."""

    dtype = np.dtype(np.float32)

    def _init_children(self, children: Sequence[Preprocessor]) -> None:
        self._children = list(children)
        self._sizes = [c.size for c in self._children]
        self._bounds = np.concatenate([[0], np.cumsum(self._sizes)]).astype(np.int64).tolist()
        self.shape = (int(self._bounds[-1]),)

    def _parts(self, obs: Any) -> Sequence[Any]:
        raise NotImplementedError  # abstract

    def _batch_parts(self, obs_list: Any) -> list[Any]:
        raise NotImplementedError  # abstract

    @property
    def observation_space(self) -> spaces.Box:
        box = super().observation_space
        # Models that need the structure (action masking: a Dict; QMIX: a group's Tuple) read it from here.
        box.original_space = self._space
        return box

    def _low(self) -> np.ndarray:
        parts = [np.asarray(c._low(), dtype=np.float32).reshape(-1) for c in self._children]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def _high(self) -> np.ndarray:
        parts = [np.asarray(c._high(), dtype=np.float32).reshape(-1) for c in self._children]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def transform(self, obs: Any) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        self.write(obs, out, 0)
        return out

    def write(self, obs: Any, array: np.ndarray, offset: int = 0) -> None:
        flat = flat_view(array)
        for child, part, start in zip(self._children, self._parts(obs), self._bounds):
            child.write(part, flat, offset + start)

    def transform_batch(self, obs_list: Any) -> np.ndarray:
        parts = self._batch_parts(obs_list)
        b = len(parts[0]) if parts else len(obs_list)
        out = np.empty((b, self.size), dtype=np.float32)
        # One vectorised call per child, not per observation.
        for child, part, lo, hi in zip(self._children, parts, self._bounds, self._bounds[1:]):
            out[:, lo:hi] = child.transform_batch(part).reshape(b, -1)
        return out

    def check(self, obs: Any) -> None:
        try:
            parts = self._parts(obs)
            reason = "" if len(parts) == len(self._children) else (
                f"{len(parts)} components, the space has {len(self._children)}"
            )
        except Exception as e:  # wrong container type, missing key, ...
            parts, reason = None, str(e)
        if reason:
            raise ValueError(
                f"Observation {describe_observation(obs)} does not match the observation space "
                f"{self._space} ({type(self).__name__}): {reason}."
            )
        for label, child, part in zip(self._labels(), self._children, parts):
            try:
                child.check(part)
            except ValueError as e:
                raise ValueError(f"In {self._space}, component {label}: {e}") from None

    def _labels(self) -> list[str]:
        raise NotImplementedError  # abstract


class TupleFlatteningPreprocessor(_FlatteningPreprocessor):
    """Tuple -> concatenation of each component's flattened transform."""

    def __init__(self, space: spaces.Tuple, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(space, options)
        self._init_children([_flat_child(s, options) for s in space.spaces])

    def _parts(self, obs: Any) -> Sequence[Any]:
        if not isinstance(obs, (tuple, list)):
            raise ValueError(f"expected a tuple observation, got {type(obs).__name__}")
        return obs

    def _batch_parts(self, obs_list: Any) -> list[Any]:
        return [[o[i] for o in obs_list] for i in range(len(self._children))]

    def _labels(self) -> list[str]:
        return [f"[{i}]" for i in range(len(self._children))]


class DictFlatteningPreprocessor(_FlatteningPreprocessor):
    """Dict -> concatenation of each value's flattened transform, in the space's key order.

    `transform_batch` also accepts a dict of stacked arrays (what Gymnasium vector envs return).
    """

    def __init__(self, space: spaces.Dict, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(space, options)
        self._keys = list(space.spaces.keys())
        self._init_children([_flat_child(s, options) for s in space.spaces.values()])

    def _parts(self, obs: Any) -> Sequence[Any]:
        if not isinstance(obs, Mapping):
            raise ValueError(f"expected a dict observation, got {type(obs).__name__}")
        return [obs[k] for k in self._keys]

    def _batch_parts(self, obs_list: Any) -> list[Any]:
        if isinstance(obs_list, Mapping):
            return [obs_list[k] for k in self._keys]
        return [[o[k] for o in obs_list] for k in self._keys]

    def column_slices(self) -> dict[Any, slice]:
        """`{key: slice}`: where each value sits in the flattened observation."""
        return {k: slice(lo, hi) for k, lo, hi in zip(self._keys, self._bounds, self._bounds[1:])}

    def _labels(self) -> list[str]:
        return [repr(k) for k in self._keys]

    def check(self, obs: Any) -> None:
        if isinstance(obs, Mapping) and set(obs) != set(self._keys):
            raise ValueError(
                f"Observation keys {sorted(map(str, obs))} differ from the observation space's "
                f"keys {self._keys} ({self._space})."
            )
        super().check(obs)


class _FloatNoPreprocessor(NoPreprocessor):
    """Box inside a Tuple/Dict: always float32 (the parts are concatenated into one vector)."""

    def __init__(self, space: spaces.Box, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(space, options)
        self.dtype = np.dtype(np.float32)


def _flat_child(space: gym.Space, options: Mapping[str, Any] | None) -> Preprocessor:
    if isinstance(space, spaces.Box):
        return _FloatNoPreprocessor(space, options)
    # Imported here: `get_preprocessor` chooses among these classes too (a component may be a
    # Tuple or Dict itself), so its module imports this one.
    from rlfleet.models.preprocessors import get_preprocessor

    return get_preprocessor(space, options)


__all__ = ["DictFlatteningPreprocessor", "TupleFlatteningPreprocessor"]
