"""Key names inside the config's nested dicts, checked against what each dict takes.

Merging (``utils.deep_update``) rejects an unknown top-level key, and an unknown key in a
nested dict that has no rule below; the dicts below it lets through (they used to take
anything). Here each of them is checked, the error naming the full dotted path and the
closest valid key:

==================================  ===========================================================
dict                                its keys are checked against
==================================  ===========================================================
``model``                           the algorithm's model keys (``MODEL_DEFAULTS`` and its own)
``multiagent``                      the ``multiagent.*`` keys
``multiagent.policies.<id>`` config an overlay of the trainer config, as ``evaluation_config``
                                    (only for policies of the trainer's own policy class)
``evaluation_config``               the whole config: an overlay, checked by these same rules
``exploration_config``              ``type`` and the parameters of that exploration class
``logger_config``                   ``type`` and ``logdir``, unless a ``type`` is the user's own
any other dict with a dict default  its default's keys (e.g. SAC's ``Q_model``)
==================================  ===========================================================

User-owned dicts stay free: ``env_config``, ``model.custom_model_config``, ``input_config``
(a custom reader's options), the environment-variable dicts, the TensorFlow session args,
``custom_resources_per_worker``. ``optimizer`` is checked where its options are known
(``policy.optimizer_choice.check_adam_options``; APEX's replay entries by APEX).
"""
from __future__ import annotations

import inspect
from typing import Any, FrozenSet, Mapping, Optional

from rlfleet.module_aliases import MOVED
from rlfleet.utils.deep_update import unknown_key_message

# Dotted paths (from a config's root) whose dicts take any key.
FREE_DICTS: FrozenSet[str] = frozenset({
    "env_config", "model.custom_model_config", "input_config", "optimizer", "custom_resources_per_worker",
    "extra_python_environs_for_driver", "extra_python_environs_for_worker", "tf_session_args",
    "local_tf_session_args", "multiagent.policies",
})

# rlfleet's own loggers (rlfleet.results, a layer above config: named, not imported) and their
# modules; the file loggers read no option, each tracker its own dict (checked by the tracker);
# `logdir` is UnifiedLogger's.
_BUILT_IN_LOGGERS = {"JsonLogger": "rlfleet.results.logger", "CSVLogger": "rlfleet.results.logger",
                     "TBXLogger": "rlfleet.results.logger", "MLflowLogger": "rlfleet.results.mlflow_tracker",
                     "WandbLogger": "rlfleet.results.wandb_tracker"}
_TRACKER_OPTION = {"MLflowLogger": "mlflow", "WandbLogger": "wandb"}
_LOGGER_OPTIONS = frozenset({"type", "logdir"})

# Arguments the policy passes to an exploration class itself (`make_exploration`'s context).
_EXPLORATION_CONTEXT = frozenset({"self", "action_space", "policy_config", "generator", "np_random", "model"})


def check_nested_keys(user: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """Raises for a key of `user` (a partial config) that no declared dict takes.

    Args:
        user: the user's config, before merging.
        defaults: the algorithm's full default config.

    Raises:
        ValueError: naming the key's dotted path and the closest valid key.
    """
    _check_dict(user, defaults, defaults, prefix="", root_path="")


def _check_dict(user: Mapping[str, Any], known: Mapping[str, Any], defaults: Mapping[str, Any], *,
                prefix: str, root_path: str) -> None:
    """`prefix`: the dotted path of `user` in the user's config (for messages); `root_path`:
    the same path relative to the config (or overlay) it belongs to (for the rules)."""
    for key, value in user.items():
        path, rel = f"{prefix}{key}", f"{root_path}{key}"
        if key not in known:
            raise ValueError(unknown_key_message(key, path, known.keys()))
        if rel == "logger_config" and isinstance(value, dict):
            _check_logger_options(value, path)
            continue
        if not isinstance(value, dict) or rel in FREE_DICTS:
            if rel == "multiagent.policies" and isinstance(value, dict):
                _check_policy_overlays(value, defaults, prefix=f"{path}.")
            continue
        if rel == "evaluation_config":
            _check_dict(value, defaults, defaults, prefix=f"{path}.", root_path="")
        elif rel == "exploration_config":
            _check_exploration(value, known.get(key), path)
        elif isinstance(known[key], dict):
            _check_dict(value, known[key], defaults, prefix=f"{path}.", root_path=f"{rel}.")


def _check_policy_overlays(policies: Mapping[str, Any], defaults: Mapping[str, Any], *, prefix: str) -> None:
    # A policy of its own class may read keys of its own; one of the trainer's class
    # (None) reads the trainer's keys only, so its overlay is checked like evaluation_config.
    for pid, spec in policies.items():
        if isinstance(spec, (list, tuple)) and len(spec) == 4:
            policy_class, overlay = spec[0], spec[3]
        else:
            policy_class, overlay = getattr(spec, "policy_class", None), getattr(spec, "config", None)
        if policy_class is None and isinstance(overlay, dict):
            _check_dict(overlay, defaults, defaults, prefix=f"{prefix}{pid}.config.", root_path="")


def _is_built_in_logger(kind: Any) -> bool:
    return _built_in_logger_name(kind) is not None


def _built_in_logger_name(kind: Any) -> Optional[str]:
    if isinstance(kind, type):
        return kind.__name__ if _BUILT_IN_LOGGERS.get(kind.__name__) == kind.__module__ else None
    if not isinstance(kind, str):
        return None
    module, _, name = kind.replace(":", ".").rpartition(".")
    # A bare name, or one under the loggers' module by its path or an old one (module_aliases.py).
    return name if name in _BUILT_IN_LOGGERS and MOVED.get(module, module) in ("", _BUILT_IN_LOGGERS[name]) else None


def _check_logger_options(value: Mapping[str, Any], path: str) -> None:
    # A logger of the user's own may take any option; rlfleet's (the default) take none.
    kinds = value.get("type")
    kinds = kinds if isinstance(kinds, (list, tuple)) else [kinds]
    if not all(kind is None or _is_built_in_logger(kind) for kind in kinds):
        return
    # A tracker's options sit under its own key, taken only when that tracker is a type.
    allowed = _LOGGER_OPTIONS | {_TRACKER_OPTION[n] for n in map(_built_in_logger_name, kinds) if n in _TRACKER_OPTION}
    for key in value:
        if key not in allowed:
            raise ValueError(unknown_key_message(key, f"{path}.{key}", allowed)
                             + " (rlfleet's file loggers take no options, MLflowLogger and WandbLogger theirs under "
                               "'mlflow' and 'wandb'; a logger class of your own, as 'type', may take any)")


def exploration_parameters(kind: Any) -> Optional[FrozenSet[str]]:
    """The `exploration_config` keys the exploration class `kind` takes, "type" included;
    None when they cannot be known (the class cannot be resolved, or takes only **kwargs)."""
    # Imported here: the exploration package sits above config in the layers.
    from rlfleet.exploration.stochastic_sampling import resolve_exploration_class

    try:
        cls = resolve_exploration_class(kind)
    except ValueError:
        return None  # the value check of exploration_config.type reports it
    names = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            return None
        names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    names -= _EXPLORATION_CONTEXT
    return frozenset(names | {"type"}) if names else None


def _check_exploration(value: Mapping[str, Any], default: Any, path: str) -> None:
    default_type = default.get("type", "StochasticSampling") if isinstance(default, dict) else "StochasticSampling"
    known = exploration_parameters(value.get("type", default_type))
    if known is None:
        return
    for key in value:
        if key not in known:
            raise ValueError(unknown_key_message(key, f"{path}.{key}", known)
                             + f" ({value.get('type', default_type)!r} takes {sorted(known)})")
    sub = value.get("sub_exploration")
    if isinstance(sub, dict) and "type" in sub:  # an exploration inside this one (ParameterNoise's)
        _check_exploration(sub, None, f"{path}.sub_exploration")
