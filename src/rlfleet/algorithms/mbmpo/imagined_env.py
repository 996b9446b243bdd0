"""The learned world MB-MPO trains in: a vectorised env that steps one ensemble member and
scores its transitions with the real env's reward function, and the hook that finds that
function.

MB-MPO needs the reward of an imagined transition, and (as RLlib 1.x) does not learn it: the
env must expose `reward(obs, action, next_obs)` over batches (NumPy arrays `[B, ...]`,
returning `[B]`). Start states come from the real env's own `reset()`.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import numpy as np
import torch

from rlfleet.algorithms.mbmpo.dynamics import DynamicsEnsemble

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def reward_function(env: Any) -> RewardFn:
    """The env's batched `reward(obs, action, next_obs)`, looked up on the env and on every
    wrapper inside it.

    Raises:
        ValueError: naming the hook, when neither the env nor a wrapped env has it.
    """
    seen, candidate = set(), env
    while candidate is not None and id(candidate) not in seen:
        seen.add(id(candidate))
        fn = getattr(type(candidate), "reward", None)
        # gymnasium.RewardWrapper.reward(reward) transforms one reward: not the hook.
        if callable(fn) and fn.__code__.co_argcount == 4:
            return getattr(candidate, "reward")
        candidate = candidate.__dict__.get("env", None) if hasattr(candidate, "__dict__") else None
    raise ValueError(
        f"MB-MPO needs the env's reward function to score imagined transitions: a method "
        f"reward(obs, action, next_obs) over batches of NumPy arrays, returning one reward per row; "
        f"{type(env).__name__} has none. Add it to the env (see "
        "rlfleet.env.examples.pendulum_with_reward:PendulumWithReward)")


class ImaginedVectorEnv:
    """`num_envs` copies of the env, simulated by ensemble member `member`.

    Args:
        ensemble: the fitted dynamics ensemble.
        member: the member that steps the env.
        reward_fn: the real env's `reward(obs, action, next_obs)`.
        reset_fn: `n -> [n, obs_dim]` start observations (the real env's resets).
        num_envs: copies stepped together.
        horizon: steps per imagined episode (all copies end together).
        obs_low, obs_high: the observation bounds; predictions are clipped into them.
    """

    def __init__(self, ensemble: DynamicsEnsemble, member: int, reward_fn: RewardFn,
                 reset_fn: Callable[[int], np.ndarray], num_envs: int, horizon: int,
                 obs_low: Optional[np.ndarray] = None, obs_high: Optional[np.ndarray] = None):
        if not 0 <= member < ensemble.size:
            raise ValueError(f"member {member} is out of range for an ensemble of {ensemble.size}")
        self.ensemble, self.member, self.reward_fn, self.reset_fn = ensemble, int(member), reward_fn, reset_fn
        self.num_envs, self.horizon = int(num_envs), int(horizon)
        self.obs_low, self.obs_high = obs_low, obs_high
        self.obs: Optional[np.ndarray] = None
        self.t = 0

    def reset(self) -> np.ndarray:
        self.obs = np.asarray(self.reset_fn(self.num_envs), dtype=np.float32).reshape(self.num_envs, -1)
        self.t = 0
        return self.obs

    def step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, bool]:
        """One step of every copy with env-space `actions` `[num_envs, act_dim]`.

        Returns:
            `(next_obs, rewards, done)`: done once `horizon` steps were taken.
        """
        if self.obs is None:
            raise RuntimeError("ImaginedVectorEnv.step() before reset()")
        actions = np.asarray(actions, dtype=np.float32).reshape(self.num_envs, -1)
        with torch.no_grad():
            nxt = self.ensemble.predict(torch.as_tensor(self.obs), torch.as_tensor(actions), self.member).numpy()
        if self.obs_low is not None:
            # Unbounded model errors would compound; the real env never leaves its box.
            nxt = np.clip(nxt, self.obs_low, self.obs_high)
        rewards = np.asarray(self.reward_fn(self.obs, actions, nxt), dtype=np.float32).reshape(self.num_envs)
        self.obs = nxt.astype(np.float32)
        self.t += 1
        return self.obs, rewards, self.t >= self.horizon


__all__ = ["ImaginedVectorEnv", "RewardFn", "reward_function"]
