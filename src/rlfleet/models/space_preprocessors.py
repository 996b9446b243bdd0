"""The preprocessors of the flat spaces: Box (`NoPreprocessor`), Discrete and MultiDiscrete
(`OneHotPreprocessor`), MultiBinary (`MultiBinaryPreprocessor`); the table of which space
gets which is in `rlfleet.models.preprocessors`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from gymnasium import spaces

from rlfleet.models.preprocessor_base import Preprocessor, flat_view


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
        flat = flat_view(array)
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
        flat = flat_view(array)
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
        flat = flat_view(array)
        flat[offset : offset + self.size] = np.asarray(obs).reshape(-1)


__all__ = ["MultiBinaryPreprocessor", "NoPreprocessor", "OneHotPreprocessor"]
