"""EpsilonGreedy: the greedy action, or with probability epsilon a uniformly random one."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.utils.schedules import PiecewiseSchedule, Schedule, schedule_from_spec


class EpsilonGreedy(Exploration):
    """Epsilon-greedy over Q-values (the action distribution's inputs), for DQN.

    Epsilon falls linearly from `initial_epsilon` to `final_epsilon` over
    `epsilon_timesteps` env steps (after `warmup_timesteps` at `initial_epsilon`), then
    stays there; `epsilon_schedule` (any schedule spec) replaces that. Random actions are
    drawn from the acting policy's own torch generator, among the actions whose Q-value is
    not -inf (masked actions stay masked).

    Args:
        action_space: a Discrete action space.
        initial_epsilon: epsilon at timestep 0.
        final_epsilon: epsilon after the decay.
        epsilon_timesteps: length of the decay.
        warmup_timesteps: steps at `initial_epsilon` before the decay starts.
        epsilon_schedule: a schedule spec overriding the three numbers above.
    """

    def __init__(self, action_space: gym.Space, *, initial_epsilon: float = 1.0, final_epsilon: float = 0.05,
                 epsilon_timesteps: int = int(1e5), warmup_timesteps: int = 0, epsilon_schedule=None,
                 **_ignored):
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"exploration_config.type 'EpsilonGreedy' needs a Discrete action space, got "
                             f"{action_space}; use GaussianNoise or OrnsteinUhlenbeckNoise for Box actions")
        self.action_space = action_space
        if epsilon_schedule is not None:
            self.epsilon_schedule: Schedule = schedule_from_spec(epsilon_schedule, "exploration_config.epsilon_schedule")
        else:
            warmup = int(warmup_timesteps)
            self.epsilon_schedule = PiecewiseSchedule(
                [(0, initial_epsilon), (warmup, initial_epsilon), (warmup + max(1, int(epsilon_timesteps)), final_epsilon)]
            )

    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns `(actions, logp)`; logp is 0 (RLlib 1.x reports no log-likelihood either)."""
        self.last_timestep = timestep
        q = dist.inputs
        greedy = torch.argmax(q, dim=-1)
        zeros = torch.zeros(q.shape[0])
        if not explore:
            return greedy, zeros
        epsilon = self.epsilon_schedule(timestep)
        # Uniform among the allowed actions: argmax of uniform noise, -1 on masked ones.
        noise = torch.rand(q.shape, generator=generator, dtype=torch.float32)
        # (masked actions have Q = -inf, or the lowest float as built-in action masking sets)
        noise = torch.where(q <= torch.finfo(q.dtype).min, torch.full_like(noise, -1.0), noise)
        random_actions = torch.argmax(noise, dim=-1)
        pick_random = torch.rand(q.shape[0], generator=generator) < epsilon
        return torch.where(pick_random, random_actions, greedy), zeros

    def get_info(self) -> dict:
        return {"cur_epsilon": float(self.epsilon_schedule(self.last_timestep))}


def per_worker_epsilon(worker_index: int, num_workers: int) -> float:
    """Ape-X's fixed epsilon of remote worker `worker_index` (1..n) of `num_workers` (Horgan
    et al. 2018, arXiv:1803.00933, as RLlib 1.x computes it): 0.4 ** (1 + 7 * i / (n - 1)), with n - 1
    taken as 1 for a single worker; 0 for the local worker (index 0: it only evaluates)."""
    if worker_index <= 0:
        return 0.0
    return 0.4 ** (1 + 7 * worker_index / float(max(1, num_workers - 1)))


class PerWorkerEpsilonGreedy(EpsilonGreedy):
    """EpsilonGreedy with one fixed epsilon per worker (Ape-X): with remote workers, worker
    i of n keeps `per_worker_epsilon(i, n)` for the whole run and the local worker acts
    greedily; with no remote workers (`num_workers: 0`) it is plain EpsilonGreedy."""

    def __init__(self, action_space: gym.Space, *, policy_config: Optional[dict] = None, **kwargs):
        super().__init__(action_space, **kwargs)
        cfg = policy_config or {}
        num_workers = int(cfg.get("num_workers", 0) or 0)
        if num_workers > 0:
            eps = per_worker_epsilon(int(cfg.get("worker_index", 0) or 0), num_workers)
            self.epsilon_schedule = PiecewiseSchedule([(0, eps), (1, eps)])
