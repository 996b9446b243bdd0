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


_EXPLORATIONS = {"StochasticSampling": StochasticSampling}


def make_exploration(config: dict, action_space: gym.Space):
    """Builds the exploration object `config["exploration_config"]` describes."""
    cfg = dict(config.get("exploration_config") or {"type": "StochasticSampling"})
    kind = cfg.pop("type", "StochasticSampling")
    cls = kind if isinstance(kind, type) else _EXPLORATIONS.get(kind)
    if cls is None:
        raise ValueError(
            f"exploration_config.type {kind!r} is unknown; available: {sorted(_EXPLORATIONS)}"
        )
    return cls(action_space, **cfg)
