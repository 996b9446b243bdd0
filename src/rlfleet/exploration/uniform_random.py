"""Random: uniformly random actions whenever exploring (RLlib 1.x's `Random`)."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.exploration.uniform import uniform_actions
from rlfleet.utils.spaces import flat_action_size, policy_action_bounds


class Random(Exploration):
    """Uniform over the action space when exploring, for any algorithm and any action space
    the samplers support; the policy's deterministic action with explore=False.

    Box actions are uniform over the range the policy acts in ([-1, 1] with
    `normalize_actions`, else the Box's bounds; [-1, 1] on unbounded dimensions); Discrete
    and MultiDiscrete actions are uniform among the legal ones under action masking. The
    log-likelihood reported is the uniform distribution's.

    Args:
        action_space: the policy's action space.
        policy_config: the policy's config (for `normalize_actions`).
    """

    def __init__(self, action_space: gym.Space, *, policy_config: Optional[dict] = None):
        try:
            flat_action_size(action_space)
        except ValueError as e:
            raise ValueError(f"exploration_config.type 'Random' cannot serve the action space: {e}") from None
        self.action_space = action_space
        self._box_bounds = None
        if isinstance(action_space, gym.spaces.Box):
            normalize = bool((policy_config or {}).get("normalize_actions", True))
            self._box_bounds = policy_action_bounds(action_space, normalize)

    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns `(actions, logp)`: uniform ones when exploring, else the base class's (the
        mode, logp 0)."""
        if not explore:
            return super().get_exploration_action(dist, explore, timestep, generator)
        self.last_timestep = timestep
        return uniform_actions(self.action_space, dist.inputs, generator, self._box_bounds)
