"""Action noise for deterministic continuous policies (DDPG, TD3): Gaussian and
Ornstein-Uhlenbeck, each with an initial phase of uniformly random actions."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.utils.schedules import PiecewiseSchedule, Schedule, schedule_from_spec
from rlfleet.utils.spaces import policy_action_bounds


class GaussianNoise(Exploration):
    """Deterministic action + `scale(t) * stddev * N(0, 1)`, clipped to the action bounds.

    For the first `random_timesteps` steps actions are uniform over the bounds instead.
    `scale` goes linearly from `initial_scale` to `final_scale` over the `scale_timesteps`
    that follow. The policy acts in [-1, 1] when `normalize_actions` (the sampler maps to the
    env's bounds), else in the Box's own bounds. With explore=False: the deterministic action.

    Args:
        action_space: a Box action space.
        random_timesteps: steps of uniformly random actions at the start.
        stddev: the noise standard deviation (before scaling).
        initial_scale, final_scale, scale_timesteps: the linear scale schedule.
        scale_schedule: a schedule spec replacing it.
        policy_config: the policy's config (for `normalize_actions`).
    """

    def __init__(self, action_space: gym.Space, *, random_timesteps: int = 1000, stddev: float = 0.1,
                 initial_scale: float = 1.0, final_scale: float = 0.02, scale_timesteps: int = 10000,
                 scale_schedule=None, policy_config: Optional[dict] = None, **_ignored):
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"exploration_config.type {type(self).__name__!r} needs a Box action space, "
                             f"got {action_space}; use EpsilonGreedy or StochasticSampling for discrete actions")
        self.action_space = action_space
        self.random_timesteps = int(random_timesteps)
        self.stddev = float(stddev)
        normalize = bool((policy_config or {}).get("normalize_actions", True))
        low, high = policy_action_bounds(action_space, normalize)
        self.low, self.high = torch.as_tensor(low), torch.as_tensor(high)
        # Where a bound is infinite, random actions come from [-1, 1].
        self._rand_low = torch.where(torch.isfinite(self.low), self.low, -torch.ones_like(self.low))
        self._rand_high = torch.where(torch.isfinite(self.high), self.high, torch.ones_like(self.high))
        if scale_schedule is not None:
            self.scale_schedule: Schedule = schedule_from_spec(scale_schedule, "exploration_config.scale_schedule")
        else:
            start = self.random_timesteps
            self.scale_schedule = PiecewiseSchedule(
                [(0, initial_scale), (start, initial_scale), (start + max(1, int(scale_timesteps)), final_scale)]
            )

    def _uniform(self, shape, generator):
        u = torch.rand(shape, generator=generator)
        return self._rand_low + u * (self._rand_high - self._rand_low)

    def _noise(self, actions: torch.Tensor, scale: float, generator) -> torch.Tensor:
        return scale * self.stddev * torch.randn(actions.shape, generator=generator)

    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns `(actions, logp)`; logp is 0 (deterministic policy)."""
        self.last_timestep = timestep
        actions = dist.deterministic_sample()
        zeros = torch.zeros(actions.shape[0])
        if not explore:
            return actions, zeros
        if timestep < self.random_timesteps:
            return self._uniform(actions.shape, generator), zeros
        noisy = actions + self._noise(actions, self.scale_schedule(timestep), generator)
        return torch.maximum(torch.minimum(noisy, self.high), self.low), zeros

    def get_info(self) -> dict:
        return {"cur_scale": float(self.scale_schedule(self.last_timestep))}


class OrnsteinUhlenbeckNoise(GaussianNoise):
    """GaussianNoise's schedule and random phase, with temporally correlated noise.

    Per step: `x += -ou_theta * x + ou_sigma * N(0, 1)`; the action gets
    `scale(t) * ou_base_scale * x * (high - low)` (with `high - low` taken as 1 on unbounded
    dimensions). Deviation from RLlib 1.x: `x` is kept per batch row (one process per
    sub-env) rather than one vector shared by the whole batch; it restarts at zero when the
    batch size changes.

    Args:
        ou_theta: mean reversion rate.
        ou_sigma: diffusion scale.
        ou_base_scale: overall noise scale.
        (others): as GaussianNoise.
    """

    def __init__(self, action_space: gym.Space, *, ou_theta: float = 0.15, ou_sigma: float = 0.2,
                 ou_base_scale: float = 0.1, random_timesteps: int = 1000, initial_scale: float = 1.0,
                 final_scale: float = 0.02, scale_timesteps: int = 10000, **kwargs):
        kwargs.pop("stddev", None)
        super().__init__(action_space, random_timesteps=random_timesteps, stddev=1.0, initial_scale=initial_scale,
                         final_scale=final_scale, scale_timesteps=scale_timesteps, **kwargs)
        self.ou_theta = float(ou_theta)
        self.ou_sigma = float(ou_sigma)
        self.ou_base_scale = float(ou_base_scale)
        width = self.high - self.low
        self._width = torch.where(torch.isfinite(width), width, torch.ones_like(width))
        self.ou_state = torch.zeros((0, *action_space.shape))

    def _noise(self, actions: torch.Tensor, scale: float, generator) -> torch.Tensor:
        if self.ou_state.shape != actions.shape:
            self.ou_state = torch.zeros(actions.shape)
        self.ou_state = self.ou_state + (-self.ou_theta * self.ou_state
                                         + self.ou_sigma * torch.randn(actions.shape, generator=generator))
        return scale * self.ou_base_scale * self.ou_state * self._width

    def get_state(self) -> dict:
        state = super().get_state()
        state["ou_state"] = self.ou_state.numpy().tolist()
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        if "ou_state" in state:
            self.ou_state = torch.as_tensor(np.asarray(state["ou_state"], np.float32))
