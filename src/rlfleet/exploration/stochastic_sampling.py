"""StochasticSampling: sample from the action distribution; the mode when not exploring."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import torch

from rlfleet.exploration.uniform import uniform_actions
from rlfleet.models.distributions import ActionDistribution


class StochasticSampling:
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
        """Returns `(actions, logp)`; logp is 0 for deterministic actions."""
        self.last_timestep = timestep
        if not explore:
            actions = dist.deterministic_sample()
            return actions, torch.zeros(actions.shape[0])
        if timestep < self.random_timesteps:
            return self._uniform(dist, generator)
        actions = dist.sample(generator)
        return actions, dist.logp(actions)

    def _uniform(self, dist, generator):
        return uniform_actions(self.action_space, dist.inputs, generator)

    def get_state(self) -> dict:
        return {"last_timestep": int(self.last_timestep)}

    def set_state(self, state: dict) -> None:
        self.last_timestep = int(state.get("last_timestep", 0))


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
    "package.module.Class" / "package.module:Class".

    Raises:
        ValueError: naming the value and the registered names.
    """
    if isinstance(kind, type):
        return kind
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
            return cls
    raise ValueError(f"exploration_config.type {kind!r} is unknown; use one of {sorted(known)}, an "
                     "exploration class, or a 'package.module.Class' path")


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
    if sub is None and getattr(cls, "default_sub_exploration", None) is not None:
        sub = cfg["sub_exploration"] = dict(cls.default_sub_exploration)
    if isinstance(sub, dict):  # an exploration inside this one (ParameterNoise's, Curiosity's), built first
        if "type" not in sub:
            raise ValueError(f"exploration_config.sub_exploration needs a 'type', got {sub!r}")
        cfg["sub_exploration"] = make_exploration(dict(config, exploration_config=sub), action_space, **context)
    for name, value in dict(context, policy_config=config).items():
        if name not in cfg and _accepts(cls, name):
            cfg[name] = value
    return cls(action_space, **cfg)
