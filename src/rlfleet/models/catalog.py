"""ModelCatalog: picks the model and action distribution for a space and a `model` config."""
from __future__ import annotations

from typing import Callable, Dict, Tuple, Type

import gymnasium as gym
import numpy as np

from rlfleet.models.distributions import ActionDistribution, Categorical, DiagGaussian, MultiCategorical
from rlfleet.models.fcnet import FullyConnectedNetwork
from rlfleet.models.torch_model import TorchModel

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
    def get_action_dist(action_space: gym.Space, model_config: dict) -> Tuple[Callable, int]:
        """Returns `(dist_class, num_model_outputs)` for `action_space`.

        Raises:
            ValueError: for an action space no distribution handles yet.
        """
        custom = model_config.get("custom_action_dist")
        if custom:
            if custom not in _CUSTOM_ACTION_DISTS:
                raise ValueError(
                    f"model.custom_action_dist {custom!r} is not registered; registered: "
                    f"{sorted(_CUSTOM_ACTION_DISTS)}. Call ModelCatalog.register_custom_action_dist first."
                )
            cls = _CUSTOM_ACTION_DISTS[custom]
            return cls, cls.required_model_output_shape(action_space, model_config)
        if isinstance(action_space, gym.spaces.Discrete):
            return Categorical, int(action_space.n)
        if isinstance(action_space, gym.spaces.MultiDiscrete):
            lens = [int(n) for n in np.asarray(action_space.nvec).ravel()]

            def make(inputs, model=None):
                return MultiCategorical(inputs, model, lens)

            make.required_model_output_shape = MultiCategorical.required_model_output_shape
            return make, int(sum(lens))
        if isinstance(action_space, gym.spaces.Box):
            if len(action_space.shape) > 1:
                raise ValueError(
                    f"Box action spaces must be 1-D, got shape {action_space.shape}; flatten the "
                    "actions in an env wrapper"
                )
            return DiagGaussian, DiagGaussian.required_model_output_shape(action_space, model_config)
        raise ValueError(
            f"Unsupported action space {action_space}; supported: Discrete, MultiDiscrete, Box "
            "(MultiBinary, Dict and Tuple actions land with the models-and-spaces work)"
        )

    @staticmethod
    def get_model(
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str = "model",
    ) -> TorchModel:
        """Builds the policy's model: the registered custom model, else a fully connected net."""
        custom = model_config.get("custom_model")
        if custom:
            cls = custom if isinstance(custom, type) else _CUSTOM_MODELS.get(custom)
            if cls is None:
                raise ValueError(
                    f"model.custom_model {custom!r} is not registered; registered: "
                    f"{sorted(_CUSTOM_MODELS)}. Call ModelCatalog.register_custom_model(name, cls) first."
                )
            kwargs = dict(model_config.get("custom_model_config") or {})
            return cls(obs_space, action_space, num_outputs, model_config, name, **kwargs)
        return FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config, name)


def registered_custom_models() -> Dict[str, type]:
    return dict(_CUSTOM_MODELS)


__all__ = ["ModelCatalog", "ActionDistribution", "registered_custom_models"]
