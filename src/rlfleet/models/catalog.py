"""ModelCatalog: picks the model and action distribution for a space and a `model` config."""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.models.distributions import (
    ActionDistribution,
    Bernoulli,
    Categorical,
    DiagGaussian,
    MultiActionDistribution,
    MultiCategorical,
    SquashedGaussian,
)
from rlfleet.models.fcnet import FullyConnectedNetwork
from rlfleet.models.torch_model import TorchModel
from rlfleet.utils.spaces import flat_action_size, is_bounded_box, leaf_spaces

_CUSTOM_MODELS: Dict[str, type] = {}
_CUSTOM_ACTION_DISTS: Dict[str, type] = {}


class ModelCatalog:
    """Registry and factory for models and action distributions."""

    @staticmethod
    def register_custom_model(name: str, model_class: type) -> None:
        """Makes `model_class` selectable as `config["model"]["custom_model"] = name`."""
        if not isinstance(name, str):
            raise TypeError(f"custom model name must be a str, got {type(name).__name__}")
        _CUSTOM_MODELS[name] = model_class

    @staticmethod
    def register_custom_action_dist(name: str, dist_class: type) -> None:
        """Makes `dist_class` selectable as `config["model"]["custom_action_dist"] = name`."""
        _CUSTOM_ACTION_DISTS[name] = dist_class

    @staticmethod
    def register_custom_preprocessor(name: str, preprocessor_class: type) -> None:
        """Deprecated as in RLlib 1.x (custom preprocessors can clash with the built-in ones; use a
        gymnasium.ObservationWrapper): makes a `Preprocessor` subclass a `model.custom_preprocessor` choice."""
        from rlfleet.models.preprocessors import register_custom_preprocessor

        register_custom_preprocessor(name, preprocessor_class)

    @staticmethod
    def get_action_dist(action_space: gym.Space, model_config: dict, dist_type: Optional[str] = None
                        ) -> Tuple[Callable, int]:
        """Returns `(dist_class, num_model_outputs)` for `action_space`.

        Discrete -> Categorical, MultiDiscrete -> MultiCategorical, Box -> DiagGaussian (or
        SquashedGaussian into [-1, 1] when `dist_type="squashed_gaussian"`; the sampler
        unsquashes into the bounds), MultiBinary -> Bernoulli, Dict / Tuple ->
        MultiActionDistribution over the leaves (flat actions, see `rlfleet.utils.spaces`).
        `model.custom_action_dist` (a registered name or a class) overrides all of these.

        Args:
            action_space: the policy's action space.
            model_config: the `model` sub-config.
            dist_type: None, or "squashed_gaussian" for bounded Box spaces.

        Raises:
            ValueError: for an action space no distribution handles.
        """
        custom = model_config.get("custom_action_dist")
        if custom:
            if isinstance(custom, type):
                return custom, custom.required_model_output_shape(action_space, model_config)
            if custom not in _CUSTOM_ACTION_DISTS:
                raise ValueError(
                    f"model.custom_action_dist {custom!r} is not registered; registered: "
                    f"{sorted(_CUSTOM_ACTION_DISTS)}. Call ModelCatalog.register_custom_action_dist first."
                )
            cls = _CUSTOM_ACTION_DISTS[custom]
            return cls, cls.required_model_output_shape(action_space, model_config)
        return _builtin_action_dist(action_space, model_config, dist_type)

    @staticmethod
    def get_model(
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str = "model",
    ) -> TorchModel:
        """Builds the policy's model.

        The registered custom model (`custom_model`, a name or a class, built with
        `custom_model_config` as keyword arguments); else a VisionNetwork for image
        observations (3-D, or 2-D with `conv_filters` set); else a FullyConnectedNetwork.
        With `use_lstm` (`use_attention`) that model is built in feature mode
        (`num_outputs=None`) and wrapped in an LSTMWrapper (a GTrXL AttentionWrapper). When the
        observation holds an action mask (`model.action_mask_key`), that model sees the rest of
        it inside an ActionMaskModel.
        """
        from rlfleet.models.action_mask import ActionMaskModel, mask_layout

        layout = mask_layout(obs_space, action_space, model_config)
        if layout is not None:
            return ActionMaskModel(obs_space, action_space, num_outputs, model_config, name, layout=layout,
                                   build_inner=lambda rest: ModelCatalog.get_model(
                                       rest, action_space, num_outputs, model_config, f"{name}_inner"))
        custom = model_config.get("custom_model")
        kwargs: dict = {}
        if custom:
            cls = custom if isinstance(custom, type) else _CUSTOM_MODELS.get(custom)
            if cls is None:
                raise ValueError(
                    f"model.custom_model {custom!r} is not registered; registered: "
                    f"{sorted(_CUSTOM_MODELS)}. Call ModelCatalog.register_custom_model(name, cls) first."
                )
            kwargs = dict(model_config.get("custom_model_config") or {})
        else:
            cls = _default_model_class(obs_space, model_config)
        if model_config.get("use_lstm") and model_config.get("use_attention"):
            raise ValueError("'model.use_lstm' and 'model.use_attention' are both True; a model takes one "
                             "memory: set one of them False")
        if model_config.get("use_attention"):
            from rlfleet.models.attention import AttentionWrapper

            return AttentionWrapper(obs_space, action_space, num_outputs, model_config, name, base_class=cls,
                                    base_kwargs=kwargs)
        if model_config.get("use_lstm"):
            from rlfleet.models.recurrent import LSTMWrapper

            return LSTMWrapper(obs_space, action_space, num_outputs, model_config, name, base_class=cls,
                               base_kwargs=kwargs)
        return cls(obs_space, action_space, num_outputs, model_config, name, **kwargs)


def _default_model_class(obs_space: gym.Space, model_config: dict) -> type:
    shape = getattr(obs_space, "shape", None) or ()
    if len(shape) == 3 or (len(shape) == 2 and model_config.get("conv_filters")):
        from rlfleet.models.visionnet import VisionNetwork

        return VisionNetwork
    return FullyConnectedNetwork


def registered_custom_models() -> Dict[str, type]:
    return dict(_CUSTOM_MODELS)


def registered_custom_action_dists() -> Dict[str, type]:
    return dict(_CUSTOM_ACTION_DISTS)


__all__ = ["ModelCatalog", "ActionDistribution", "registered_custom_models", "registered_custom_action_dists"]


def _builtin_action_dist(space: gym.Space, model_config: dict, dist_type: Optional[str] = None
                         ) -> Tuple[Callable, int]:
    if isinstance(space, gym.spaces.Discrete):
        return Categorical, int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        lens = [int(n) for n in np.asarray(space.nvec).ravel()]
        return _factory(MultiCategorical, MultiCategorical.required_model_output_shape, input_lens=lens), sum(lens)
    if isinstance(space, gym.spaces.MultiBinary):
        return Bernoulli, Bernoulli.required_model_output_shape(space, model_config)
    if isinstance(space, gym.spaces.Box):
        if dist_type == "squashed_gaussian":
            if not is_bounded_box(space):
                raise ValueError(f"dist_type='squashed_gaussian' needs a bounded Box action space, got {space}")
            return SquashedGaussian, SquashedGaussian.required_model_output_shape(space, model_config)
        if dist_type not in (None, "diag_gaussian"):
            raise ValueError(f"dist_type {dist_type!r} is unknown; use None, 'diag_gaussian' or 'squashed_gaussian'")
        return DiagGaussian, DiagGaussian.required_model_output_shape(space, model_config)
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        leaves = leaf_spaces(space)
        if not leaves:
            raise ValueError(f"Action space {space} has no leaf spaces")
        children, input_lens = zip(*(_builtin_action_dist(leaf, model_config, dist_type) for leaf in leaves))
        sizes = [flat_action_size(leaf) for leaf in leaves]
        return (_factory(MultiActionDistribution, None, child_dists=list(children), input_lens=list(input_lens),
                         action_sizes=sizes), int(sum(input_lens)))
    raise ValueError(
        f"Unsupported action space {space} ({type(space).__name__}); supported: Discrete, MultiDiscrete, "
        "Box, MultiBinary, and Dict / Tuple of these. Set model.custom_action_dist for anything else."
    )


class _factory:
    """`dist_class(inputs, model)` for a distribution that needs extra, space-derived arguments.

    A class instance rather than a closure so it can say what it builds (`dist_type`) and so
    `isinstance` checks on the built distribution keep working.
    """

    def __init__(self, cls: type, required_shape, **kwargs):
        self.dist_type = cls
        self.kwargs = kwargs
        if required_shape is not None:
            self.required_model_output_shape = required_shape

    def __call__(self, inputs, model=None):
        return self.dist_type(inputs, model, **self.kwargs)

    def __repr__(self) -> str:
        return f"{self.dist_type.__name__}({', '.join(f'{k}={v!r}' for k, v in self.kwargs.items())})"
