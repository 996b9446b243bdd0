"""SlateEpsilonGreedy: the greedy slate, or with probability epsilon a slate of distinct
candidates drawn uniformly (plain EpsilonGreedy needs a Discrete space, and drawing each
position of a MultiDiscrete on its own would repeat documents)."""
from __future__ import annotations

from typing import Optional

import gymnasium as gym
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.utils.schedules import PiecewiseSchedule


class SlateEpsilonGreedy(Exploration):
    """Epsilon falls linearly from `initial_epsilon` to `final_epsilon` over
    `epsilon_timesteps` env steps, after `warmup_timesteps` at `initial_epsilon`.

    Args:
        action_space: `MultiDiscrete([num_candidates] * slate_size)`.
        initial_epsilon, final_epsilon, epsilon_timesteps, warmup_timesteps: the schedule.
    """

    def __init__(self, action_space: gym.Space, *, initial_epsilon: float = 1.0, final_epsilon: float = 0.01,
                 epsilon_timesteps: int = 250000, warmup_timesteps: int = 20000, **_context):
        if not isinstance(action_space, gym.spaces.MultiDiscrete):
            raise ValueError(f"exploration_config.type 'SlateEpsilonGreedy' needs a MultiDiscrete slate action "
                             f"space, got {action_space}")
        super().__init__(action_space)
        warmup = int(warmup_timesteps)
        self.epsilon_schedule = PiecewiseSchedule([(0, initial_epsilon), (warmup, initial_epsilon),
                                                   (warmup + max(1, int(epsilon_timesteps)), final_epsilon)])

    def slates(self, greedy: torch.Tensor, num_candidates: int, explore: bool, timestep: int,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """`[B, k]`: each row the greedy slate or, with probability epsilon, a random one."""
        self.last_timestep = timestep
        if not explore:
            return greedy
        b, k = greedy.shape
        # k distinct candidates: the first k of a random permutation per row.
        random = torch.rand(b, num_candidates, generator=generator).argsort(dim=1)[:, :k]
        pick = torch.rand(b, generator=generator) < self.epsilon_schedule(timestep)
        return torch.where(pick.unsqueeze(1), random, greedy)

    def get_info(self) -> dict:
        return {"cur_epsilon": float(self.epsilon_schedule(self.last_timestep))}
