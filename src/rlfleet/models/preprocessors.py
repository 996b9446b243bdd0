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

from typing import Any, Mapping

import gymnasium as gym
from gymnasium import spaces

from rlfleet.models.flattening_preprocessors import DictFlatteningPreprocessor, TupleFlatteningPreprocessor
from rlfleet.models.preprocessor_base import Preprocessor
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


__all__ = ["DictFlatteningPreprocessor", "MultiBinaryPreprocessor", "NoPreprocessor", "OneHotPreprocessor",
           "Preprocessor", "TupleFlatteningPreprocessor", "get_preprocessor", "register_custom_preprocessor",
           "registered_custom_preprocessors"]
