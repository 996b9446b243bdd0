"""The preprocessor base class: what every preprocessor offers (`shape`, `dtype`,
`observation_space`, `transform`, `transform_batch`, `write` into a preallocated buffer,
`check` of a first observation) and the helpers the concrete ones share."""

from __future__ import annotations

from typing import Any, Mapping

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
        flat = flat_view(array)
        flat[offset : offset + self.size] = self._flat(obs)

    def _flat(self, obs: Any) -> np.ndarray:
        return self.transform(obs).reshape(-1)

    def check(self, obs: Any) -> None:
        """Raises ValueError if `obs` is not in the space (use on first observations only)."""
        if not self._contains(obs):
            problem = observation_problem(obs, self._space)
            raise ValueError(
                f"Observation {describe_observation(obs)} is outside the observation space {self._space}"
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


def flat_view(array: np.ndarray) -> np.ndarray:
    """`array` as a flat view (never a copy: a write into a copy would be lost)."""
    if array.ndim == 1:
        return array
    if not array.flags.c_contiguous:
        # reshape would silently copy and the write would be lost.
        raise ValueError(
            f"Preprocessor.write: destination of shape {array.shape} is not C-contiguous"
        )
    return array.reshape(-1)


def describe_observation(obs: Any) -> str:
    """A short description of `obs` for error messages (values when small, else shape and dtype)."""
    if isinstance(obs, Mapping):
        return "{" + ", ".join(f"{k!r}: {describe_observation(v)}" for k, v in obs.items()) + "}"
    if isinstance(obs, tuple):
        return "(" + ", ".join(describe_observation(v) for v in obs) + ")"
    arr = np.asarray(obs)
    return f"{obs!r} (shape={arr.shape}, dtype={arr.dtype})" if arr.size <= 8 else (
        f"<array shape={arr.shape}, dtype={arr.dtype}>"
    )


__all__ = ["Preprocessor", "describe_observation", "flat_view"]
