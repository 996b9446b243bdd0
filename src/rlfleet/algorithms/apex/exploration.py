"""Ape-X DDPG's exploration: Ornstein-Uhlenbeck noise with one fixed scale per worker."""
from __future__ import annotations

from typing import Optional

import gymnasium as gym

from rlfleet.exploration.epsilon_greedy import per_worker_epsilon
from rlfleet.exploration.noise import OrnsteinUhlenbeckNoise
from rlfleet.utils.schedules import PiecewiseSchedule


class PerWorkerOrnsteinUhlenbeckNoise(OrnsteinUhlenbeckNoise):
    """OrnsteinUhlenbeckNoise whose scale is fixed per worker (the reference's Ape-X DDPG):
    with remote workers, worker i of n scales its noise by 0.4 ** (1 + 7 * i / (n - 1)) for the
    whole run (`per_worker_epsilon`) and the local worker adds none; with `num_workers: 0` it
    is plain OrnsteinUhlenbeckNoise. The initial `random_timesteps` of uniform actions stay."""

    def __init__(self, action_space: gym.Space, *, policy_config: Optional[dict] = None, **kwargs):
        super().__init__(action_space, policy_config=policy_config, **kwargs)
        cfg = policy_config or {}
        num_workers = int(cfg.get("num_workers", 0) or 0)
        if num_workers > 0:
            scale = per_worker_epsilon(int(cfg.get("worker_index", 0) or 0), num_workers)
            self.scale_schedule = PiecewiseSchedule([(0, scale), (1, scale)])


__all__ = ["PerWorkerOrnsteinUhlenbeckNoise"]
