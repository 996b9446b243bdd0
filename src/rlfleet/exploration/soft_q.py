"""SoftQ: Boltzmann exploration over Q-values (or any categorical policy's logits)."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.models.distributions import Categorical


class SoftQ(Exploration):
    """Samples from softmax(inputs / temperature), RLlib 1.x's SoftQ: for DQN (SimpleQ,
    APEX) the inputs are the Q-values. With explore=False: the greedy (argmax) action. The
    log-likelihood reported is that of the tempered distribution. Masked actions (inputs at
    the lowest float) keep probability 0.

    Args:
        action_space: a Discrete action space.
        temperature: > 0; lower is greedier, higher closer to uniform.
    """

    def __init__(self, action_space: gym.Space, *, temperature: float = 1.0):
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"exploration_config.type 'SoftQ' needs a Discrete action space, got {action_space}; "
                             "use GaussianNoise or OrnsteinUhlenbeckNoise for Box actions, StochasticSampling "
                             "or Random for others")
        if not float(temperature) > 0.0:
            raise ValueError(f"exploration_config.temperature must be > 0 for 'SoftQ', got {temperature!r}")
        self.action_space = action_space
        self.temperature = float(temperature)

    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns `(actions, logp)`; logp is 0 for greedy actions."""
        self.last_timestep = timestep
        if not explore:
            actions = torch.argmax(dist.inputs, dim=-1)
            return actions, torch.zeros(actions.shape[0])
        tempered = Categorical(dist.inputs / self.temperature)
        actions = tempered.sample(generator)
        return actions, tempered.logp(actions)

    def get_info(self) -> dict:
        return {"temperature": self.temperature}
