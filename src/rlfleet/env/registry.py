"""Env registry: names -> env creators, and resolution of the `env` config key.

`resolve_env` turns whatever the user put under `env` into `(name, creator)` without building
an env (the Trainer resolves on the driver, workers build later). Accepted forms, tried in this
order for strings:

1. a name given to `register_env`;
2. a class path, ``"pkg.module.Class"`` or ``"pkg.module:Class"`` -> ``Class(env_context)``;
3. ``"envpool:<task id>"`` (``"envpool:CartPole-v1"``) -> one EnvPool per worker
   (`rlfleet.env.envpool_env`; checked here: envpool installed, the id known);
4. a Gymnasium id (``"CartPole-v1"``, ``"ALE/Pong-v5"``, ``"module:Id-v0"``)
   -> ``gym.make(id, **env_context)``.

A class (not a string) is registered under its ``__name__``.
"""

from __future__ import annotations

import difflib
import importlib
import logging
from typing import Any, Callable

import gymnasium as gym

from rlfleet.env.env_context import EnvContext
from rlfleet.env.envpool_env import ENVPOOL_PREFIX


logger = logging.getLogger(__name__)

EnvCreator = Callable[[EnvContext], Any]

# Global name -> creator table. Module-level on purpose: Ray Tune's `register_env` (which RLlib
# 1.x users call) is process-global, and Ray workers re-register by re-running the user's script/imports.
_ENV_REGISTRY: dict[str, EnvCreator] = {}

# Gymnasium >= 1.0 dropped env plugins: these namespaces register only when their package is
# imported. Importing on demand keeps "ALE/Pong-v5" working as a plain config string.
# "module:function" also calls the function: `import minatar` registers nothing, MinAtar's
# ids appear only once `minatar.gym.register_envs()` runs.
_NAMESPACE_PACKAGES = {"ALE": "ale_py", "MinAtar": "minatar.gym:register_envs"}


def register_env(name: str, env_creator: Callable[[EnvContext], gym.Env]) -> None:
    """Registers an env creator under a name usable as the `env` config value.

    Args:
        name: The name, e.g. ``"my_env"``. Registering a name again replaces the creator.
        env_creator: Callable taking an `EnvContext` and returning the env.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(
            f"register_env: name must be a non-empty str, got {type(name).__name__}: {name!r}"
        )
    if not callable(env_creator):
        raise TypeError(
            f"register_env({name!r}, ...): env_creator must be callable "
            f"(EnvContext -> env), got {type(env_creator).__name__}: {env_creator!r}"
        )
    if name in _ENV_REGISTRY and _ENV_REGISTRY[name] is not env_creator:
        logger.debug("register_env: replacing the creator registered as %r", name)
    _ENV_REGISTRY[name] = env_creator


def registered_envs() -> list[str]:
    """Returns the sorted names given to `register_env`."""
    return sorted(_ENV_REGISTRY)


def registered_env_creators() -> dict[str, EnvCreator]:
    """The name -> creator table of `register_env` (a copy)."""
    return dict(_ENV_REGISTRY)


class _ClassCreator:
    """Creator `cls(env_context)`; a class (not a lambda) so stdlib pickle can ship it."""

    def __init__(self, cls: Callable[[EnvContext], Any]) -> None:
        self.cls = cls

    def __call__(self, env_context: EnvContext) -> Any:
        return self.cls(env_context)

    def __repr__(self) -> str:
        return f"_ClassCreator({getattr(self.cls, '__qualname__', self.cls)!r})"


class _GymCreator:
    """Creator `gym.make(env_id, **env_context)`; picklable like `_ClassCreator`."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id

    def __call__(self, env_context: EnvContext) -> gym.Env:
        kwargs = dict(env_context) if env_context is not None else {}
        # A worker process may not have imported the namespace's package yet.
        _register_namespace(self.env_id.partition(":")[2] if ":" in self.env_id else self.env_id)
        try:
            return gym.make(self.env_id, **kwargs)
        except TypeError as e:
            if not kwargs:
                raise
            # Most often an env_config key the env's constructor does not take.
            raise ValueError(
                f"gym.make({self.env_id!r}, **env_config) failed with env_config keys "
                f"{sorted(kwargs)}: {e}. The keys of env_config are passed as keyword "
                f"arguments to the Gymnasium env; remove the ones it does not accept."
            ) from e

    def __repr__(self) -> str:
        return f"_GymCreator({self.env_id!r})"


def _import_class_path(path: str) -> Callable[..., Any] | None:
    """Returns the object a class path names, or None when it is not an importable path.

    Errors raised while importing an existing module (a bug in the user's module) propagate:
    swallowing them would turn a real traceback into a vague "unknown env".
    """
    if ":" in path:
        module_name, _, attr = path.partition(":")
    elif "." in path:
        module_name, _, attr = path.rpartition(".")
    else:
        return None
    if not module_name or not attr:
        return None
    if not all(p.isidentifier() for p in module_name.split(".")):
        return None
    if not all(p.isidentifier() for p in attr.split(".")):
        return None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        # Only "this module (or a parent) does not exist" means "not a class path".
        if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
            return None
        raise
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if callable(obj) else None


def _is_gym_id(env_id: str) -> bool:
    """Whether `env_id` names a Gymnasium env, without creating it."""
    name = env_id
    if ":" in env_id:
        # Gymnasium's "module:EnvId" form: importing the module registers its envs.
        module_name, _, name = env_id.partition(":")
        try:
            importlib.import_module(module_name)
        except ImportError:
            return False
    if name in gym.registry:
        return True
    if _register_namespace(name) and name in gym.registry:
        return True
    try:
        gym.spec(name)
        return True
    except Exception:  # gym.error.Error and friends, or a malformed id
        pass
    # A versionless id ("CartPole") is what gym.make accepts as "the latest version".
    ns, base, version = _parse_id(name)
    if base is not None and version is None:
        try:
            from gymnasium.envs.registration import find_highest_version

            return find_highest_version(ns, base) is not None
        except Exception:
            return False
    return False


def _register_namespace(env_id: str) -> bool:
    """Registers the ids of `env_id`'s namespace when `_NAMESPACE_PACKAGES` knows it.

    Returns:
        Whether the namespace is now registered (False: not a known namespace, or its
        package is not installed).
    """
    ns, _, _ = _parse_id(env_id)
    if ns is None or ns not in _NAMESPACE_PACKAGES:
        return False
    if any(spec.namespace == ns for spec in gym.registry.values()):
        return True  # registering again would only warn about overriding every id
    module_name, _, function = _NAMESPACE_PACKAGES[ns].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    if function:
        getattr(module, function)()
    return True


def _parse_id(env_id: str) -> tuple[str | None, str | None, int | None]:
    try:
        from gymnasium.envs.registration import parse_env_id

        return parse_env_id(env_id)
    except Exception:
        return None, None, None


def _gym_error_hint(env_id: str) -> str:
    try:
        gym.spec(env_id.partition(":")[2] if ":" in env_id else env_id)
    except Exception as e:  # Gymnasium's own hint, e.g. which versions exist
        return str(e)
    return ""


def resolve_env(spec: Any) -> tuple[str | None, EnvCreator | None]:
    """Resolves the `env` config value to `(name, creator)`; never creates the env.

    Args:
        spec: None, a registered name, a class path (``"pkg.mod.Class"`` /
            ``"pkg.mod:Class"``), a Gymnasium id, or an env class.

    Returns:
        ``(None, None)`` for None; otherwise the env's name and a callable taking an
        `EnvContext` and returning the env.

    Raises:
        ValueError: For an unknown string (with suggestions) or an unsupported type.
    """
    if spec is None:
        return None, None
    if isinstance(spec, type):
        register_env(spec.__name__, _ClassCreator(spec))
        return spec.__name__, _ENV_REGISTRY[spec.__name__]
    if not isinstance(spec, str):
        raise ValueError(
            f"env: expected None, a registered env name, a Gymnasium id, a class path "
            f"('pkg.module.Class' or 'pkg.module:Class') or an env class; got "
            f"{type(spec).__name__}: {spec!r}"
        )

    if spec in _ENV_REGISTRY:
        return spec, _ENV_REGISTRY[spec]

    # Before the class path and Gymnasium forms: "envpool:Id" is also Gymnasium's
    # "module:Id" form, which would make a single Gymnasium env instead of a pool.
    if spec.startswith(ENVPOOL_PREFIX):
        from rlfleet.env.envpool_env import EnvPoolCreator  # imports envpool only when asked for

        return spec, EnvPoolCreator(spec[len(ENVPOOL_PREFIX):])

    obj = _import_class_path(spec)
    if obj is not None:
        return spec, _ClassCreator(obj)

    if _is_gym_id(spec):
        return spec, _GymCreator(spec)

    candidates = list(gym.registry.keys()) + list(_ENV_REGISTRY)
    close = difflib.get_close_matches(spec, candidates, n=5, cutoff=0.6)
    hint = _gym_error_hint(spec)
    msg = (
        f"env={spec!r} is unknown: not a registered env (registered: {registered_envs()}), "
        f"not an importable class path ('pkg.module.Class' or 'pkg.module:Class'), "
        f"not a Gymnasium id."
    )
    if close:
        msg += f" Did you mean one of {close}?"
    if hint:
        msg += f" (Gymnasium says: {hint})"
    msg += " Use register_env(name, creator) for a custom env."
    raise ValueError(msg)
