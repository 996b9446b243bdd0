"""Action noise with one fixed scale per worker (Ape-X, Horgan et al. 2018): Gaussian and
Ornstein-Uhlenbeck, as RLlib 1.x's PerWorkerGaussianNoise and
PerWorkerOrnsteinUhlenbeckNoise (`per_worker_epsilon` gives the scales)."""
from __future__ import annotations

from typing import Optional

import gymnasium as gym

from rlfleet.exploration.epsilon_greedy import per_worker_epsilon
from rlfleet.exploration.noise import GaussianNoise, OrnsteinUhlenbeckNoise
from rlfleet.utils.schedules import PiecewiseSchedule


def fixed_per_worker_scale(policy_config: Optional[dict]) -> Optional[float]:
    """The noise scale a worker keeps for the whole run, or None to keep the noise's own
    schedule: 0 on evaluation workers (`in_evaluation`) and on the local worker when there
    are remote ones (it only evaluates); `per_worker_epsilon(i, n)` on remote worker i of n;
    None with no remote workers (`num_workers: 0`: the local worker samples)."""
    cfg = policy_config or {}
    if cfg.get("in_evaluation"):
        return 0.0
    num_workers = int(cfg.get("num_workers", 0) or 0)
    if num_workers <= 0:
        return None
    return per_worker_epsilon(int(cfg.get("worker_index", 0) or 0), num_workers)


def _fix_scale(noise: GaussianNoise, policy_config: Optional[dict]) -> None:
    scale = fixed_per_worker_scale(policy_config)
    if scale is not None:
        noise.scale_schedule = PiecewiseSchedule([(0, scale), (1, scale)])


class PerWorkerGaussianNoise(GaussianNoise):
    """GaussianNoise whose scale is fixed per worker (`fixed_per_worker_scale`): remote
    worker i of n adds `0.4 ** (1 + 7 * i / (n - 1)) * stddev * N(0, 1)` for the whole run,
    the local worker (with remote ones) and evaluation workers add none; with `num_workers: 0`
    it is plain GaussianNoise. The initial `random_timesteps` of uniform actions stay."""

    def __init__(self, action_space: gym.Space, *, policy_config: Optional[dict] = None, **kwargs):
        super().__init__(action_space, policy_config=policy_config, **kwargs)
        _fix_scale(self, policy_config)


class PerWorkerOrnsteinUhlenbeckNoise(OrnsteinUhlenbeckNoise):
    """OrnsteinUhlenbeckNoise whose scale is fixed per worker, as PerWorkerGaussianNoise's
    (RLlib 1.x's Ape-X DDPG exploration, `rllib/agents/ddpg/apex.py`)."""

    def __init__(self, action_space: gym.Space, *, policy_config: Optional[dict] = None, **kwargs):
        super().__init__(action_space, policy_config=policy_config, **kwargs)
        _fix_scale(self, policy_config)
