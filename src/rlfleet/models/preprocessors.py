"""Preprocessors: turn raw env observations into the arrays the model sees.

`get_preprocessor(space)` picks one by space type:

| space          | preprocessor          | output                                        |
| -------------- | --------------------- | --------------------------------------------- |
| Box            | NoPreprocessor        | same shape, float32 (uint8 images stay uint8) |
| Discrete       | OneHotPreprocessor    | one-hot `[n]`                                 |
| MultiDiscrete  | OneHotPreprocessor    | concatenated one-hots `[sum(nvec)]`           |
| MultiBinary    | MultiBinaryPreprocessor | same shape, float32                         |
| Tuple          | TupleFlatteningPreprocessor | concatenation of the flattened parts    |
| Dict           | DictFlatteningPreprocessor  | same, in the space's key order (sorted) |

Flattening order matches `gymnasium.spaces.flatten` for these spaces.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlfleet.env.checks import observation_problem


class Preprocessor:
    """Base class. Subclasses set `shape`, `dtype` and the flat `_low`/`_high` bounds.

    Attributes:
        shape: Shape of one transformed observation.
        size: Number of elements of one transformed observation.
        dtype: NumPy dtype of transformed observations (float32, or uint8 for images).
        observation_space: The Box the model sees.
    """

    shape: tuple[int, ...]
    dtype: np.dtype = np.dtype(np.float32)

    def __init__(self, space: gym.Space, options: Mapping[str, Any] | None = None) -> None:
        self._space = space
        self._options = dict(options or {})

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def original_space(self) -> gym.Space:
        return self._space

    @property
    def observation_space(self) -> spaces.Box:
        low = np.asarray(self._low(), dtype=self.dtype).reshape(self.shape)
        high = np.asarray(self._high(), dtype=self.dtype).reshape(self.shape)
        return spaces.Box(low, high, dtype=self.dtype)

    def _low(self) -> np.ndarray:
        return np.zeros(self.size, dtype=np.float32)

    def _high(self) -> np.ndarray:
        return np.ones(self.size, dtype=np.float32)

    def transform(self, obs: Any) -> np.ndarray:
        """Returns one observation as an array of `shape` and `dtype`."""
        raise NotImplementedError  # abstract

    def transform_batch(self, obs_list: Any) -> np.ndarray:
        """Returns a batch of observations as one array `[B, *shape]`."""
        out = np.empty((len(obs_list), self.size), dtype=self.dtype)
        for i, obs in enumerate(obs_list):
            self.write(obs, out[i], 0)
        return out.reshape((len(obs_list),) + self.shape)

    def write(self, obs: Any, array: np.ndarray, offset: int = 0) -> None:
        """Writes the flattened observation into `array[offset:offset + size]` (in place).

        Args:
            obs: One raw observation.
            array: A C-contiguous destination, typically a row `buf[i]` of a preallocated
                `[B, size]` buffer; it is indexed as flat.
            offset: Flat position in `array` where this observation starts.
        """
        flat = _flat_view(array)
        flat[offset : offset + self.size] = self._flat(obs)

    def _flat(self, obs: Any) -> np.ndarray:
        return self.transform(obs).reshape(-1)

    def check(self, obs: Any) -> None:
        """Raises ValueError if `obs` is not in the space (use on first observations only)."""
        if not self._contains(obs):
            problem = observation_problem(obs, self._space)
            raise ValueError(
                f"Observation {_describe(obs)} is outside the observation space {self._space}"
                f" ({type(self).__name__}){': ' + problem if problem else ''}. Check the env's "
                f"observation_space and what its reset()/step() return."
            )

    def _contains(self, obs: Any) -> bool:
        try:
            if self._space.contains(obs):
                return True
            return bool(self._space.contains(np.asarray(obs)))
        except Exception:
            return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(space={self._space}, shape={self.shape})"


def _flat_view(array: np.ndarray) -> np.ndarray:
    if array.ndim == 1:
        return array
    if not array.flags.c_contiguous:
        # reshape would silently copy and the write would be lost.
        raise ValueError(
            f"Preprocessor.write: destination of shape {array.shape} is not C-contiguous"
        )
    return array.reshape(-1)


def _describe(obs: Any) -> str:
    if isinstance(obs, Mapping):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in obs.items()) + "}"
    if isinstance(obs, tuple):
        return "(" + ", ".join(_describe(v) for v in obs) + ")"
    arr = np.asarray(obs)
    return f"{obs!r} (shape={arr.shape}, dtype={arr.dtype})" if arr.size <= 8 else (
        f"<array shape={arr.shape}, dtype={arr.dtype}>"
    )


class NoPreprocessor(Preprocessor):
    """Box: keeps the shape, casts to float32; a uint8 image Box (2-D/3-D) stays uint8."""

    def __init__(self, space: spaces.Box, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(space, options)
        self.shape = tuple(space.shape)
        # Images stay uint8 so they travel 4x smaller; the vision net scales them itself.
        is_image = space.dtype == np.uint8 and len(space.shape) in (2, 3)
        self.dtype = np.dtype(np.uint8) if is_image else np.dtype(np.float32)

    def _low(self) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.asarray(self._space.low, dtype=np.float64).astype(self.dtype).reshape(-1)

    def _high(self) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.asarray(self._space.high, dtype=np.float64).astype(self.dtype).reshape(-1)

    @property
    def observation_space(self) -> spaces.Box:
        if self.dtype == np.uint8:
            return self._space
        with np.errstate(over="ignore"):
            low = self._space.low.astype(np.float32)
            high = self._space.high.astype(np.float32)
        return spaces.Box(low, high, dtype=np.float32)

    def transform(self, obs: Any) -> np.ndarray:
        # No copy when the env already returns the right dtype (the common case).
        return np.asarray(obs, dtype=self.dtype)

    def transform_batch(self, obs_list: Any) -> np.ndarray:
        out = np.asarray(obs_list, dtype=self.dtype)
        return out.reshape((out.shape[0],) + self.shape)

    def write(self, obs: Any, array: np.ndarray, offset: int = 0) -> None:
        flat = _flat_view(array)
        flat[offset : offset + self.size] = np.asarray(obs).reshape(-1)

    def _contains(self, obs: Any) -> bool:
        # Gymnasium's Box.contains rejects e.g. float64 obs for a float32 space (can_cast);
        # envs do that all the time and the cast is harmless, so check shape and bounds.
        try:
            arr = np.asarray(obs)
        except Exception:
            return False
        if arr.shape != self._space.shape or not (
            np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
        ):
            return False
        with np.errstate(invalid="ignore"):
            a = arr.astype(np.float64)
            return bool(np.all(a >= self._space.low) and np.all(a <= self._space.high))


class OneHotPreprocessor(Preprocessor):
    """Discrete -> one-hot `[n]`; MultiDiscrete -> concatenated one-hots `[sum(nvec)]`."""

    def __init__(
        self, space: spaces.Discrete | spaces.MultiDiscrete, options: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(space, options)
        if isinstance(space, spaces.Discrete):
            self._multi = False
            self._n = int(space.n)
            self._start = int(space.start)
            self.shape = (self._n,)
        else:
            self._multi = True
            nvec = np.asarray(space.nvec, dtype=np.int64).reshape(-1)
            self._nvec_shape = tuple(space.nvec.shape)
            self._start = np.asarray(space.start, dtype=np.int64).reshape(-1)
            # Position where each sub-space's one-hot begins.
            self._offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]]).astype(np.int64)
            self._offsets_minus_start = self._offsets - self._start
            self.shape = (int(nvec.sum()),)

    def transform(self, obs: Any) -> np.ndarray:
        out = np.zeros(self.shape, dtype=np.float32)
        if self._multi:
            out[self._offsets_minus_start + np.asarray(obs, dtype=np.int64).reshape(-1)] = 1.0
        else:
            out[int(obs) - self._start] = 1.0
        return out

    def transform_batch(self, obs_list: Any) -> np.ndarray:
        idx = np.asarray(obs_list, dtype=np.int64)
        b = idx.shape[0]
        out = np.zeros((b, self.shape[0]), dtype=np.float32)
        if self._multi:
            idx = idx.reshape(b, -1) + self._offsets_minus_start
            out[np.arange(b)[:, None], idx] = 1.0
        else:
            # Vectorised one-hot: one scatter instead of B Python-level writes.
            out[np.arange(b), idx.reshape(b) - self._start] = 1.0
        return out

    def write(self, obs: Any, array: np.ndarray, offset: int = 0) -> None:
        flat = _flat_view(array)
        flat[offset : offset + self.size] = 0.0
        if self._multi:
            idx = self._offsets_minus_start + np.asarray(obs, dtype=np.int64).reshape(-1)
            flat[offset + idx] = 1.0
        else:
            flat[offset + int(obs) - self._start] = 1.0

    def _contains(self, obs: Any) -> bool:
        try:
            if self._multi:
                arr = np.asarray(obs)
                if arr.shape != self._nvec_shape or not np.issubdtype(arr.dtype, np.integer):
                    return False
            elif isinstance(obs, np.ndarray) and obs.shape != ():
                return False
        except Exception:
            return False
        return super()._contains(obs)


class MultiBinaryPreprocessor(Preprocessor):
    """MultiBinary -> the same shape as float32 (0.0 / 1.0)."""

    def __init__(self, space: spaces.MultiBinary, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(space, options)
        self.shape = tuple(int(s) for s in space.shape)

    def transform(self, obs: Any) -> np.ndarray:
        return np.asarray(obs, dtype=np.float32).reshape(self.shape)

    def transform_batch(self, obs_list: Any) -> np.ndarray:
        out = np.asarray(obs_list, dtype=np.float32)
        return out.reshape((out.shape[0],) + self.shape)

    def write(self, obs: Any, array: np.ndarray, offset: int = 0) -> None:
        flat = _flat_view(array)
        flat[offset : offset + self.size] = np.asarray(obs).reshape(-1)


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
        flat = _flat_view(array)
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
                f"Observation {_describe(obs)} does not match the observation space "
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
    return get_preprocessor(space, options)


def get_preprocessor(space: gym.Space, options: Mapping[str, Any] | None = None) -> Preprocessor:
    """Returns the preprocessor for an observation space.

    Args:
        space: The env's observation space.
        options: The model config (kept for custom preprocessors; unused by the built-ins).

    Returns:
        A `Preprocessor` whose `observation_space` is what the model sees.

    Raises:
        ValueError: For spaces without a fixed-size encoding (Text, Graph, Sequence, ...).
    """
    custom = (options or {}).get("custom_preprocessor")
    if custom:
        return _custom_preprocessor(custom, space, options)
    if isinstance(space, spaces.Box):
        return NoPreprocessor(space, options)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return OneHotPreprocessor(space, options)
    if isinstance(space, spaces.MultiBinary):
        return MultiBinaryPreprocessor(space, options)
    if isinstance(space, spaces.Tuple):
        return TupleFlatteningPreprocessor(space, options)
    if isinstance(space, spaces.Dict):
        return DictFlatteningPreprocessor(space, options)
    raise ValueError(
        f"Observation space {space} ({type(space).__name__}) is not supported by the "
        f"preprocessors; supported: Box, Discrete, MultiDiscrete, MultiBinary, and Tuple/Dict "
        f"of these. Wrap the env to give it one of these spaces."
    )


# ---------------------------------------------------------------------------------------
# Custom preprocessors (`model.custom_preprocessor`), deprecated in the reference: a
# Gymnasium ObservationWrapper in the env creator does the same job and is preferred.
# ---------------------------------------------------------------------------------------
_CUSTOM_PREPROCESSORS: dict[str, type] = {}
_warned_custom = False


def register_custom_preprocessor(name: str, preprocessor_class: type) -> None:
    """Makes `preprocessor_class` selectable as `config["model"]["custom_preprocessor"] = name`.

    The class subclasses `Preprocessor`; it takes `(space, options)`, sets `shape` (and
    `dtype` if not float32) in `__init__` or implements the reference's
    `_init_shape(space, options) -> shape`, and implements `transform(obs)`.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"custom preprocessor name must be a non-empty str, got {name!r}")
    if not (isinstance(preprocessor_class, type) and issubclass(preprocessor_class, Preprocessor)):
        raise TypeError(f"custom preprocessor {name!r} must be a Preprocessor subclass, got {preprocessor_class!r}")
    _CUSTOM_PREPROCESSORS[name] = preprocessor_class


def registered_custom_preprocessors() -> dict[str, type]:
    """The name -> class table of `register_custom_preprocessor` (a copy)."""
    return dict(_CUSTOM_PREPROCESSORS)


def _custom_preprocessor(custom: Any, space: gym.Space, options: Mapping[str, Any] | None) -> Preprocessor:
    global _warned_custom
    cls = custom if isinstance(custom, type) else _CUSTOM_PREPROCESSORS.get(custom)
    if cls is None:
        raise ValueError(
            f"model.custom_preprocessor {custom!r} is not registered; registered: {sorted(_CUSTOM_PREPROCESSORS)}. "
            "Call ModelCatalog.register_custom_preprocessor(name, cls) first - or better, since custom "
            "preprocessors are deprecated, transform observations with a gymnasium.ObservationWrapper in "
            "your env creator."
        )
    if not _warned_custom:
        _warned_custom = True
        import logging

        logging.getLogger(__name__).warning(
            "model.custom_preprocessor is deprecated (as in the reference): prefer a "
            "gymnasium.ObservationWrapper in the env creator."
        )
    pp = cls(space, options)
    if not hasattr(pp, "shape"):
        if not hasattr(pp, "_init_shape"):
            raise TypeError(f"custom preprocessor {cls.__name__} must set `shape` or implement `_init_shape`")
        pp.shape = tuple(int(d) for d in pp._init_shape(space, options))
    return pp
