"""VectorEnv: `num_envs_per_worker` copies of one env stepped in lockstep.

Each sub-env resets on its own when its episode ends. `step` hands back the episode's
*final* observation in place (so the caller can bootstrap from it) and the first
observation of the next episode separately.

How an episode end maps onto learning (terminal or bootstrapped, env reset or not) is
decided by `rlfleet.env.episode_rules.EpisodeRules`, the one place for those rules.

An exception raised by a sub-env's `reset()` / `step()`, a result that is not what a
Gymnasium env returns, or a reward that is not a number comes out as an `EnvError`
naming the sub-env and its episode step (`rlfleet.env.checks`; the sampler adds the
env id, worker and episode id); the original exception is chained.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np

from rlfleet.env.checks import EnvCheckError, env_call_error
from rlfleet.env.episode_rules import EpisodeRules


@dataclass
class VectorStep:
    """What one lockstep `step` returns. Arrays have one entry per sub-env."""

    obs: List[Any]  # next observation; the *final* one for sub-envs whose episode ended
    rewards: np.ndarray
    terminateds: np.ndarray  # ended without bootstrapping
    ends: np.ndarray  # ended (terminated, truncated or horizon)
    reset_obs: Dict[int, Any]  # first observation of the next episode, for ended sub-envs that have one now
    infos: List[dict]
    # Sub-envs whose step was their reset (a vector env in Gymnasium's NEXT_STEP autoreset mode):
    # their `obs` is a next episode's first and their row is no transition. None: no such sub-env.
    starts: Optional[np.ndarray] = None


class VectorEnv:
    """Steps several envs as one.

    Args:
        envs: the sub-envs (Gymnasium API).
        rules: horizon, soft horizon and no_done_at_end (default: only the env decides).
        seeds: one seed per sub-env for its first reset (None: unseeded).
    """

    def __init__(
        self,
        envs: Sequence[gym.Env],
        *,
        rules: EpisodeRules = EpisodeRules(),
        seeds: Optional[Sequence[Optional[int]]] = None,
    ):
        if not envs:
            raise ValueError("VectorEnv needs at least one env")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.rules = rules
        self._seeds = list(seeds) if seeds is not None else [None] * self.num_envs
        self._steps = [0] * self.num_envs  # env steps of each sub-env's running episode
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
            obs.append(_reset(env, i, seed=self._seeds[i]))
            self._seeds[i] = None  # later resets continue the env's own RNG stream
        self._steps = [0] * self.num_envs
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
        rules, steps = self.rules, self._steps
        horizon = rules.horizon
        for i, env in enumerate(self.envs):
            try:
                result = env.step(actions[i])
            except Exception as e:
                raise env_call_error("step()", e, sub_env_index=i, step=steps[i] + 1) from e
            if not (isinstance(result, tuple) and len(result) == 5):
                raise _bad_result("step()", result, "(obs, reward, terminated, truncated, info)", i, steps[i] + 1)
            o, r, term, trunc, infos[i] = result
            obs[i] = o
            try:
                rewards[i] = r
            except (TypeError, ValueError):
                raise EnvCheckError(f"reward {r!r} of type {type(r).__name__} (a number expected)",
                                    sub_env_index=i, step=steps[i] + 1) from None
            length = steps[i] = steps[i] + 1
            # The common step (no end, no horizon) needs no rule lookup.
            if term or trunc or (horizon is not None and length >= horizon):
                end = rules.end(term, trunc, length)
                if end.over:
                    ends[i] = True
                    terminateds[i] = end.terminal
                    steps[i] = 0
                    # Soft horizon: the env goes on, the next episode starts here.
                    reset_obs[i] = _reset(env, i) if end.reset else o
        return VectorStep(obs, rewards, terminateds, ends, reset_obs, infos)

    def render(self, index: int = 0):
        return self.envs[index].render()

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _reset(env: gym.Env, index: int, seed: Optional[int] = None) -> Any:
    """The first observation of sub-env `index`'s next episode (`reset()` checked)."""
    try:
        result = env.reset() if seed is None else env.reset(seed=seed)
    except Exception as e:
        raise env_call_error("reset()", e, sub_env_index=index, step=0) from e
    if not (isinstance(result, tuple) and len(result) == 2):
        raise _bad_result("reset()", result, "(obs, info)", index, 0)
    return result[0]


def _bad_result(call: str, result: Any, expected: str, index: int, step: int) -> EnvCheckError:
    got = f"a tuple of {len(result)}" if isinstance(result, tuple) else f"a {type(result).__name__}"
    return EnvCheckError(f"the env's {call} returned {got}; Gymnasium envs return {expected} "
                         "(an env written for the old gym API: port it to Gymnasium's)",
                         sub_env_index=index, step=step)
