"""StochasticSampling: sample from the action distribution; the mode when not exploring."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

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
        batch = dist.inputs.shape[0]
        space = self.action_space
        if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            masked = _uniform_among_legal(dist.inputs, space, generator)
            if masked is not None:
                return masked
        if isinstance(space, gym.spaces.Discrete):
            actions = torch.randint(int(space.n), (batch,), generator=generator)
            return actions, torch.full((batch,), -float(np.log(space.n)))
        if isinstance(space, gym.spaces.MultiDiscrete):
            nvec = torch.as_tensor(np.asarray(space.nvec).ravel())
            actions = (torch.rand((batch, len(nvec)), generator=generator) * nvec).long()
            return actions, torch.full((batch,), -float(np.log(nvec.double()).sum()))
        # Box: uniform over the normalised range [-1, 1] the policy acts in.
        dim = int(np.prod(space.shape))
        actions = torch.rand((batch, dim), generator=generator) * 2.0 - 1.0
        return actions, torch.full((batch,), -dim * float(np.log(2.0)))

    def get_state(self) -> dict:
        return {"last_timestep": int(self.last_timestep)}

    def set_state(self, state: dict) -> None:
        self.last_timestep = int(state.get("last_timestep", 0))


def _uniform_among_legal(logits: torch.Tensor, space: gym.Space, generator):
    """Uniform actions among the legal ones when action masking set some logits to the lowest
    float (`(actions, logp)`), else None."""
    lowest = torch.finfo(logits.dtype).min
    if not bool((logits <= lowest).any()):
        return None
    groups = [int(space.n)] if isinstance(space, gym.spaces.Discrete) else [int(n) for n in np.ravel(space.nvec)]
    actions, logp = [], torch.zeros(logits.shape[0])
    for part in torch.split(logits, groups, dim=-1):
        legal = part > lowest
        legal = legal | ~legal.any(-1, keepdim=True)
        noise = torch.rand(part.shape, generator=generator, dtype=torch.float32)
        actions.append(torch.where(legal, noise, torch.full_like(noise, -1.0)).argmax(-1))
        logp = logp - torch.log(legal.sum(-1).float())
    return (actions[0] if len(actions) == 1 and isinstance(space, gym.spaces.Discrete)
            else torch.stack(actions, -1)), logp


def _explorations() -> dict:
    # Imported here: those modules are siblings, and this one is imported first by the policy.
    from rlfleet.exploration.epsilon_greedy import EpsilonGreedy, PerWorkerEpsilonGreedy
    from rlfleet.exploration.noise import GaussianNoise, OrnsteinUhlenbeckNoise

    _EXPLORATIONS.setdefault("EpsilonGreedy", EpsilonGreedy)
    _EXPLORATIONS.setdefault("PerWorkerEpsilonGreedy", PerWorkerEpsilonGreedy)
    _EXPLORATIONS.setdefault("GaussianNoise", GaussianNoise)
    _EXPLORATIONS.setdefault("OrnsteinUhlenbeckNoise", OrnsteinUhlenbeckNoise)
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
            `np_random`); each is passed on only to classes whose constructor takes it (or
            `**kwargs`), as is `policy_config` (the policy's whole config).
    """
    cfg = dict(config.get("exploration_config") or {"type": "StochasticSampling"})
    cls = resolve_exploration_class(cfg.pop("type", "StochasticSampling"))
    for name, value in dict(context, policy_config=config).items():
        if name not in cfg and _accepts(cls, name):
            cfg[name] = value
    return cls(action_space, **cfg)
