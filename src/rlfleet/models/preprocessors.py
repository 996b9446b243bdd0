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

from rlfleet.models.preprocessor_base import Preprocessor, describe_observation, flat_view
from rlfleet.models.space_preprocessors import MultiBinaryPreprocessor, NoPreprocessor, OneHotPreprocessor


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
# Custom preprocessors (`model.custom_preprocessor`), deprecated as in RLlib 1.x (its
# ModelCatalog warns on them too): a Gymnasium ObservationWrapper in the env creator does the
# same job, works with every library, and is preferred.
# ---------------------------------------------------------------------------------------
_CUSTOM_PREPROCESSORS: dict[str, type] = {}
_warned_custom = False


def register_custom_preprocessor(name: str, preprocessor_class: type) -> None:
    """Makes `preprocessor_class` selectable as `config["model"]["custom_preprocessor"] = name`.

    The class subclasses `Preprocessor`; it takes `(space, options)`, sets `shape` (and
    `dtype` if not float32) in `__init__` or implements RLlib 1.x's
    `_init_shape(space, options) -> shape` (so an RLlib preprocessor ports unchanged), and
    implements `transform(obs)`.
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
            "model.custom_preprocessor is deprecated (as in RLlib 1.x): prefer a "
            "gymnasium.ObservationWrapper in the env creator."
        )
    pp = cls(space, options)
    if not hasattr(pp, "shape"):
        if not hasattr(pp, "_init_shape"):
            raise TypeError(f"custom preprocessor {cls.__name__} must set `shape` or implement `_init_shape`")
        pp.shape = tuple(int(d) for d in pp._init_shape(space, options))
    return pp


# The structured spaces' preprocessors: Tuple and Dict observations flattened into one float32
# vector, each component by its own preprocessor (chosen by `get_preprocessor`, so nesting works
# to any depth), in `gymnasium.spaces.flatten`'s order. They live beside `get_preprocessor`
# because each calls it for its components.


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
    return get_preprocessor(space, options)


__all__ = ["DictFlatteningPreprocessor", "MultiBinaryPreprocessor", "NoPreprocessor", "OneHotPreprocessor",
           "Preprocessor", "TupleFlatteningPreprocessor", "get_preprocessor", "register_custom_preprocessor",
           "registered_custom_preprocessors"]
