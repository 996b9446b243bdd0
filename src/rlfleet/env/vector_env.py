"""VectorEnv: `num_envs_per_worker` copies of one env stepped in lockstep.

Each sub-env resets on its own when its episode ends. `step` hands back the episode's
*final* observation in place (so the caller can bootstrap from it) and the first
observation of the next episode separately.

How an episode end maps onto learning (Gymnasium's terminated/truncated):
- the env's `terminated`          -> terminal: no bootstrap
- the env's `truncated` or `horizon` hit -> truncated: bootstrap from V(final obs)
- `soft_horizon`: at the horizon the episode ends for metrics and learning, but the env
  is not reset; the horizon counts as terminal (the reference's "pretend done") unless
  `no_done_at_end`.
- `no_done_at_end`: no episode end is terminal; every one bootstraps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np


@dataclass
class VectorStep:
    """What one lockstep `step` returns. Arrays have one entry per sub-env."""

    obs: List[Any]  # next observation; the *final* one for sub-envs whose episode ended
    rewards: np.ndarray
    terminateds: np.ndarray  # ended without bootstrapping
    ends: np.ndarray  # ended (terminated, truncated or horizon)
    reset_obs: Dict[int, Any]  # first observation of the next episode, for ended sub-envs
    infos: List[dict]


class VectorEnv:
    """Steps several envs as one.

    Args:
        envs: the sub-envs (Gymnasium API).
        horizon: end episodes after this many steps (None: only the env decides).
        soft_horizon: at the horizon, end the episode without resetting the env.
        no_done_at_end: never mark an episode end as terminal.
        seeds: one seed per sub-env for its first reset (None: unseeded).
    """

    def __init__(
        self,
        envs: Sequence[gym.Env],
        *,
        horizon: Optional[int] = None,
        soft_horizon: bool = False,
        no_done_at_end: bool = False,
        seeds: Optional[Sequence[Optional[int]]] = None,
    ):
        if not envs:
            raise ValueError("VectorEnv needs at least one env")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.horizon = horizon
        self.soft_horizon = soft_horizon
        self.no_done_at_end = no_done_at_end
        self._seeds = list(seeds) if seeds is not None else [None] * self.num_envs
        self._steps = np.zeros(self.num_envs, dtype=np.int64)
        for env, seed in zip(self.envs, self._seeds):
            if seed is not None:
                env.action_space.seed(seed)

    def seed_next_reset(self, seeds: Sequence[Optional[int]]) -> None:
        """Seeds for the next `reset_all` (one per sub-env; None leaves that env's RNG as is)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed_next_reset: got {len(seeds)} seeds for {self.num_envs} sub-envs")
        self._seeds = list(seeds)
        for env, seed in zip(self.envs, self._seeds):
            if seed is not None:
                env.action_space.seed(seed)

    def reset_all(self) -> List[Any]:
        """Resets every sub-env (seeded on the first call) and returns their observations."""
        obs = []
        for i, env in enumerate(self.envs):
            o, _ = env.reset(seed=self._seeds[i])
            self._seeds[i] = None  # later resets continue the env's own RNG stream
            obs.append(o)
        self._steps[:] = 0
        return obs

    def step(self, actions) -> VectorStep:
        """Steps every sub-env with its action; resets the ones whose episode ended."""
        n = self.num_envs
        obs: List[Any] = [None] * n
        infos: List[dict] = [None] * n  # type: ignore[list-item]
        rewards = np.empty(n, dtype=np.float64)
        terminateds = np.zeros(n, dtype=bool)
        ends = np.zeros(n, dtype=bool)
        reset_obs: Dict[int, Any] = {}
        self._steps += 1
        horizon = self.horizon
        for i, env in enumerate(self.envs):
            o, r, term, trunc, info = env.step(actions[i])
            obs[i] = o
            rewards[i] = r
            infos[i] = info
            at_horizon = horizon is not None and self._steps[i] >= horizon
            if term or trunc:
                ends[i] = True
                terminateds[i] = bool(term) and not self.no_done_at_end
                reset_obs[i], _ = env.reset()
                self._steps[i] = 0
            elif at_horizon:
                ends[i] = True
                self._steps[i] = 0
                if self.soft_horizon:
                    terminateds[i] = not self.no_done_at_end
                    reset_obs[i] = o  # the env goes on: the next episode starts here
                else:
                    reset_obs[i], _ = env.reset()
        return VectorStep(obs, rewards, terminateds, ends, reset_obs, infos)

    def render(self, index: int = 0):
        return self.envs[index].render()

    def close(self) -> None:
        for env in self.envs:
            env.close()
