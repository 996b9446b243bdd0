"""Contextual bandits as one-step episodes: a context comes in, one arm is pulled, one
reward comes back, the episode ends. Each step's `info["regret"]` is the expected reward of
the best arm for that context minus the expected reward of the arm pulled, so a learner's
regret is measured exactly, not estimated from noisy rewards.

- `LinearContextualBandit`: each arm's expected reward is linear in the context
  (`theta_arm . x`), so the optimal arm is known for every context; the case that linear
  bandits (LinUCB, LinTS) should solve with sublinear regret.
- `WheelBandit` (Riquelme, Tucker & Snoek 2018, "Deep Bayesian Bandits Showdown"): contexts
  uniform in the unit disc; inside radius `delta` arm 0 is best (mean `mu_1` against
  `mu_2`), outside it the arm of the context's quadrant pays `mu_3`; exploration matters
  because the big payoff hides in a region that looks bad at first.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np


class _OneStepBandit(gym.Env):
    """A context per episode (`_draw_context`), the expected reward of each arm for it
    (`_expected_rewards`), Gaussian reward noise of `noise_std`."""

    noise_std: float

    def _draw_context(self) -> np.ndarray:
        raise NotImplementedError  # abstract

    def _expected_rewards(self, context: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # abstract

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[np.ndarray, Dict]:
        super().reset(seed=seed)
        self._context = self._draw_context()
        return self._context.copy(), {}

    def step(self, action: Any) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        arm = int(action)
        if not self.action_space.contains(arm):
            raise ValueError(f"{type(self).__name__}: action {action!r} is not an arm of {self.action_space}")
        means = self._expected_rewards(self._context)
        reward = float(means[arm] + self.noise_std * self.np_random.standard_normal())
        best = int(np.argmax(means))
        info = {"regret": float(means[best] - means[arm]), "optimal_arm": best}
        return self._context.copy(), reward, True, False, info


class LinearContextualBandit(_OneStepBandit):
    """`num_arms` arms whose expected rewards are `theta_arm . x` for a context `x ~ N(0, I)`
    of `context_dim` features; rewards carry N(0, `noise_std`^2) noise.

    env_config keys: `num_arms` (default 4), `context_dim` (default 4), `noise_std` (default
    0.1), `problem_seed` (default 0): the arms' `theta`s, the same in every copy of the env
    (every worker, every sub-env) made with that seed; the reset seed draws the contexts.
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        self.num_arms = int(cfg.get("num_arms", 4))
        self.context_dim = int(cfg.get("context_dim", 4))
        self.noise_std = float(cfg.get("noise_std", 0.1))
        if self.num_arms < 2 or self.context_dim < 1 or self.noise_std < 0:
            raise ValueError(f"LinearContextualBandit: num_arms >= 2, context_dim >= 1 and noise_std >= 0 are "
                             f"needed; got {self.num_arms}, {self.context_dim}, {self.noise_std}")
        problem = np.random.default_rng(int(cfg.get("problem_seed", 0)))
        self.thetas = problem.standard_normal((self.num_arms, self.context_dim))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.context_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(self.num_arms)

    def _draw_context(self) -> np.ndarray:
        return self.np_random.standard_normal(self.context_dim).astype(np.float32)

    def _expected_rewards(self, context: np.ndarray) -> np.ndarray:
        return self.thetas @ context.astype(np.float64)


class WheelBandit(_OneStepBandit):
    """The wheel bandit: 5 arms, 2-d contexts uniform in the unit disc.

    Arm 0 pays `mu_1` everywhere; arms 1-4 pay `mu_2`, except that outside radius `delta`
    the arm of the context's quadrant (1: x>=0,y>=0; 2: x<0,y>=0; 3: x<0,y<0; 4: x>=0,y<0)
    pays `mu_3`. Rewards carry N(0, `std`^2) noise.

    env_config keys (defaults: the wheel bandit of Riquelme et al. 2018, arXiv:1802.09127, as
    RLlib 1.x's `WheelBanditEnv` sets them): `delta` 0.5, `mu_1` 1.2, `mu_2` 1.0, `mu_3` 50.0, `std` 0.01.
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        self.delta = float(cfg.get("delta", 0.5))
        self.mu_1, self.mu_2, self.mu_3 = (float(cfg.get(k, d)) for k, d in
                                           (("mu_1", 1.2), ("mu_2", 1.0), ("mu_3", 50.0)))
        self.noise_std = float(cfg.get("std", 0.01))
        if not 0 < self.delta < 1:
            raise ValueError(f"WheelBandit: env_config 'delta' must be in (0, 1); got {self.delta}")
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(5)

    def _draw_context(self) -> np.ndarray:
        # Uniform in the disc: radius sqrt(u) gives area-uniform points.
        radius = np.sqrt(self.np_random.uniform())
        angle = self.np_random.uniform(0, 2 * np.pi)
        return np.array([radius * np.cos(angle), radius * np.sin(angle)], np.float32)

    def _expected_rewards(self, context: np.ndarray) -> np.ndarray:
        means = np.full(5, self.mu_2)
        means[0] = self.mu_1
        x, y = float(context[0]), float(context[1])
        if np.hypot(x, y) > self.delta:
            quadrant = (1 if y >= 0 else 4) if x >= 0 else (2 if y >= 0 else 3)
            means[quadrant] = self.mu_3
        return means


__all__ = ["LinearContextualBandit", "WheelBandit"]
