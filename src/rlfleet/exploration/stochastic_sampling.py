"""StochasticSampling: sample from the action distribution; the mode when not exploring."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import gymnasium as gym
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.exploration.uniform import uniform_actions
from rlfleet.models.distributions import ActionDistribution


class StochasticSampling(Exploration):
    """The default exploration for policy-gradient algorithms.

    Args:
        action_space: the policy's action space.
        random_timesteps: draw uniformly random actions for this many first timesteps.
    """

    def __init__(self, action_space: gym.Space, *, random_timesteps: int = 0, **_ignored):
        self.action_space = action_space
        self.random_timesteps = int(random_timesteps)
        self.last_timestep = 0

    def get_exploration_action(
        self,
        dist: ActionDistribution,
        explore: bool,
        timestep: int,
        generator: Optional[torch.Generator] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns `(actions, logp)`: uniformly random ones for the first `random_timesteps`
        when exploring, else the base class's (a sample, or the mode with logp 0)."""
        if explore and timestep < self.random_timesteps:
            self.last_timestep = timestep
            return self._uniform(dist, generator)
        return super().get_exploration_action(dist, explore, timestep, generator)

    def _uniform(self, dist, generator):
        return uniform_actions(self.action_space, dist.inputs, generator)


def _explorations() -> dict:
    # Imported here: those modules are siblings, and this one is imported first by the policy.
    from rlfleet.exploration.curiosity import Curiosity
    from rlfleet.exploration.epsilon_greedy import EpsilonGreedy, PerWorkerEpsilonGreedy
    from rlfleet.exploration.noise import GaussianNoise, OrnsteinUhlenbeckNoise
    from rlfleet.exploration.parameter_noise import ParameterNoise
    from rlfleet.exploration.re3 import RE3
    from rlfleet.exploration.per_worker import PerWorkerGaussianNoise, PerWorkerOrnsteinUhlenbeckNoise
    from rlfleet.exploration.soft_q import SoftQ
    from rlfleet.exploration.uniform_random import Random

    _EXPLORATIONS.setdefault("EpsilonGreedy", EpsilonGreedy)
    _EXPLORATIONS.setdefault("PerWorkerEpsilonGreedy", PerWorkerEpsilonGreedy)
    _EXPLORATIONS.setdefault("GaussianNoise", GaussianNoise)
    _EXPLORATIONS.setdefault("OrnsteinUhlenbeckNoise", OrnsteinUhlenbeckNoise)
    _EXPLORATIONS.setdefault("PerWorkerGaussianNoise", PerWorkerGaussianNoise)
    _EXPLORATIONS.setdefault("PerWorkerOrnsteinUhlenbeckNoise", PerWorkerOrnsteinUhlenbeckNoise)
    _EXPLORATIONS.setdefault("SoftQ", SoftQ)
    _EXPLORATIONS.setdefault("ParameterNoise", ParameterNoise)
    _EXPLORATIONS.setdefault("Random", Random)
    _EXPLORATIONS.setdefault("Curiosity", Curiosity)
    _EXPLORATIONS.setdefault("RE3", RE3)
    return _EXPLORATIONS


_EXPLORATIONS = {"StochasticSampling": StochasticSampling}


def resolve_exploration_class(kind) -> type:
    """The exploration class `kind` names: a registered name, a class, or a path
    "package.module.Class" / "package.module:Class". A class that does not subclass
    `Exploration` comes back with the base mixed in (`_with_base`).

    Raises:
        ValueError: naming the value and the registered names, or a class the base cannot be
            mixed into and the fix.
    """
    if isinstance(kind, type):
        return _with_base(kind)
    known = _explorations()
    if isinstance(kind, str) and kind in known:
        return known[kind]
    if isinstance(kind, str) and ("." in kind or ":" in kind):
        import importlib

        module, _, attr = kind.rpartition(":") if ":" in kind else kind.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"exploration_config.type {kind!r} could not be imported ({e}); use one of "
                             f"{sorted(known)}, a class, or a 'package.module.Class' path") from None
        if isinstance(cls, type):
            return _with_base(cls)
    raise ValueError(f"exploration_config.type {kind!r} is unknown; use one of {sorted(known)}, an "
                     "exploration class, or a 'package.module.Class' path")


# User classes without the base, each with the base mixed in (made once per class).
_WITH_BASE: Dict[type, type] = {}


def _with_base(cls: type) -> type:
    """`cls` when it subclasses `Exploration`; else a subclass of `(cls, Exploration)`, made
    once: user classes written before the base existed (duck-typed, with only the hooks they
    use) keep working, their own methods first and the base's defaults for every hook they
    lack, so that callers still call each hook plainly.

    Raises:
        ValueError: naming the class and the fix, when the base cannot be mixed in (a
            metaclass or layout conflict).
    """
    if issubclass(cls, Exploration):
        return cls
    mixed = _WITH_BASE.get(cls)
    if mixed is None:
        try:
            mixed = type(cls.__name__, (cls, Exploration),
                         {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})
        except TypeError as e:
            raise ValueError(f"exploration_config.type {cls.__module__}.{cls.__qualname__} does not subclass "
                             f"rlfleet.exploration.Exploration, and the base cannot be mixed in ({e}); use "
                             f"`class {cls.__name__}(Exploration)` (from rlfleet.exploration import Exploration): "
                             "the base declares every hook with a default that changes nothing") from None
        _WITH_BASE[cls] = mixed
    return mixed


def _accepts(cls: type, name: str) -> bool:
    import inspect

    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def make_exploration(config: dict, action_space: gym.Space, **context):
    """Builds the exploration object `config["exploration_config"]` describes.

    Args:
        config: the policy config (its `exploration_config`: "type" plus constructor
            arguments).
        action_space: the policy's action space.
        **context: what the policy offers its exploration (e.g. `generator`,
            `np_random`, `model`); each is passed on only to classes whose constructor takes
            it (or `**kwargs`), as is `policy_config` (the policy's whole config). A dict
            `sub_exploration` (ParameterNoise's, Curiosity's) is built the same way and passed built.
    """
    cfg = dict(config.get("exploration_config") or {"type": "StochasticSampling"})
    cls = resolve_exploration_class(cfg.pop("type", "StochasticSampling"))
    # An exploration with a default sub-exploration config (Curiosity's) gets it when none is given.
    sub = cfg.get("sub_exploration")
    if sub is None and cls.default_sub_exploration is not None:
        sub = cfg["sub_exploration"] = dict(cls.default_sub_exploration)
    if isinstance(sub, dict):  # an exploration inside this one (ParameterNoise's, Curiosity's), built first
        if "type" not in sub:
            raise ValueError(f"exploration_config.sub_exploration needs a 'type', got {sub!r}")
        cfg["sub_exploration"] = make_exploration(dict(config, exploration_config=sub), action_space, **context)
    for name, value in dict(context, policy_config=config).items():
        if name not in cfg and _accepts(cls, name):
            cfg[name] = value
    return cls(action_space, **cfg)
