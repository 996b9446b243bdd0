"""The process-global name registries, captured on the driver and installed in other processes.

`register_env`, `ModelCatalog.register_custom_model`, `register_custom_action_dist` and
`register_custom_preprocessor` fill tables of the process that calls them; a remote worker or a
Tune trial runs in another process, where a config naming `"my_model"` would find nothing. The
driver captures all four tables in one `NameRegistries` (Ray ships it with cloudpickle, as it
ships the env creator) and the other process installs it before it builds anything. The
driver's tables win: a name registered again on the driver replaces what the other process had.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict

from rlfleet.env.registry import register_env, registered_env_creators
from rlfleet.models.catalog import ModelCatalog, registered_custom_action_dists, registered_custom_models
from rlfleet.models.preprocessors import registered_custom_preprocessors


@dataclass(frozen=True)
class NameRegistries:
    """Copies of the four name -> object tables.

    Attributes:
        envs: `register_env` names -> env creators.
        models: `register_custom_model` names -> model classes.
        action_dists: `register_custom_action_dist` names -> distribution classes.
        preprocessors: `register_custom_preprocessor` names -> preprocessor classes.
    """

    envs: Dict[str, object] = field(default_factory=dict)
    models: Dict[str, type] = field(default_factory=dict)
    action_dists: Dict[str, type] = field(default_factory=dict)
    preprocessors: Dict[str, type] = field(default_factory=dict)

    @classmethod
    def capture(cls) -> "NameRegistries":
        """The tables of this process, now."""
        return cls(envs=registered_env_creators(), models=registered_custom_models(),
                   action_dists=registered_custom_action_dists(), preprocessors=registered_custom_preprocessors())

    def install(self) -> None:
        """Registers every captured name in this process (replacing a name it already has)."""
        for name, creator in self.envs.items():
            register_env(name, creator)
        for name, model_class in self.models.items():
            ModelCatalog.register_custom_model(name, model_class)
        for name, dist_class in self.action_dists.items():
            ModelCatalog.register_custom_action_dist(name, dist_class)
        for name, preprocessor_class in self.preprocessors.items():
            ModelCatalog.register_custom_preprocessor(name, preprocessor_class)
