"""rlfleet: train reinforcement-learning policies at any scale with one config.

`import rlfleet` stays light: trainers and torch load when first asked for.
"""
from __future__ import annotations

from typing import Any

from rlfleet import module_aliases as _module_aliases

__version__ = "0.1.0"

_module_aliases.install()  # old import paths of moved modules keep working (module_aliases.py)

_LAZY = {
    "Trainer": ("rlfleet.trainer", "Trainer"),
    "Algorithm": ("rlfleet.trainer", "Trainer"),  # RLlib 2.x's name for the same class
    "AlgorithmConfig": ("rlfleet.config.builder", "AlgorithmConfig"),
    "CheckpointError": ("rlfleet.utils.safe_files", "CheckpointError"),
    "CheckpointSaveError": ("rlfleet.utils.safe_files", "CheckpointSaveError"),
    "EnvError": ("rlfleet.env.checks", "EnvError"),
    "EnvCheckError": ("rlfleet.env.checks", "EnvCheckError"),
    "NonFiniteUpdateError": ("rlfleet.policy.nan_guard", "NonFiniteUpdateError"),
    "get_trainer_class": ("rlfleet.registry", "get_trainer_class"),
    "list_algorithms": ("rlfleet.registry", "list_algorithms"),
    "register_env": ("rlfleet.env.registry", "register_env"),
    "EnvContext": ("rlfleet.env.env_context", "EnvContext"),
    "DefaultCallbacks": ("rlfleet.callbacks", "DefaultCallbacks"),
    "COMMON_CONFIG": ("rlfleet.config", "COMMON_CONFIG"),
    "MODEL_DEFAULTS": ("rlfleet.config", "MODEL_DEFAULTS"),
    "with_common_config": ("rlfleet.config", "with_common_config"),
    "ModelCatalog": ("rlfleet.models.catalog", "ModelCatalog"),
    "TorchModel": ("rlfleet.models.torch_model", "TorchModel"),
    "Policy": ("rlfleet.policy.policy", "Policy"),
    "TorchPolicy": ("rlfleet.policy.torch_policy", "TorchPolicy"),
    "SampleBatch": ("rlfleet.policy.sample_batch", "SampleBatch"),
    "MultiAgentBatch": ("rlfleet.policy.sample_batch", "MultiAgentBatch"),
    "PolicySpec": ("rlfleet.policy.policy_spec", "PolicySpec"),
    "PolicyMap": ("rlfleet.policy.policy_map", "PolicyMap"),
    "MultiAgentEnv": ("rlfleet.env.multi_agent_env", "MultiAgentEnv"),
    "make_multi_agent": ("rlfleet.env.multi_agent_env", "make_multi_agent"),
    "RolloutWorker": ("rlfleet.rollout.rollout_worker", "RolloutWorker"),
    "WorkerSet": ("rlfleet.rollout.worker_set", "WorkerSet"),
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name.endswith("Config") and name not in _LAZY:
        # The algorithms' config builders (PPOConfig, ...), found through the registry, which
        # imports nothing: each is exported by its algorithm's package.
        from rlfleet.registry import config_classes

        if name in config_classes():
            _LAZY[name] = (config_classes()[name][0], name)
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlfleet' has no attribute {name!r}")
