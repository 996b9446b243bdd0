"""Tiny envs for tests. Constructors take an EnvContext (or plain dict) like real creators."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlfleet.env.checks import BOX_TOLERANCE


class CountingEnv(gym.Env):
    """Observation counts steps; terminates after `episode_len` steps (env_config key).

    Keeps the EnvContext it was built with so tests can check what the creator passed.
    """

    def __init__(self, env_config: Any = None) -> None:
        self.env_config = env_config if env_config is not None else {}
        self.episode_len = int(self.env_config.get("episode_len", 5))
        self.observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self._t += 1
        obs = np.array([self._t], np.float32)
        return obs, 1.0, self._t >= self.episode_len, False, {}


# --------------------------------------------------------------------------------------
# Deterministic envs for the core tests (sampler, postprocessing, trainer).
# --------------------------------------------------------------------------------------
class ScriptedEnv(gym.Env):
    """Fixed-length episodes with a known reward sequence and a chosen way of ending.

    env_config:
        episode_len: steps per episode (default 5).
        end: "terminated" (default) or "truncated": how the last step reports the end.
        rewards: reward of step t (1-based) is rewards[(t - 1) % len(rewards)]
            (default [1.0]).
        reward_is_episode_index: if True, the last step of episode k pays k (the number
            of resets so far) and other steps pay 0, so episode k returns exactly k.

    Observation: [t, episode_index] (float32), t = steps taken in this episode.
    """

    def __init__(self, env_config: Any = None) -> None:
        self.env_config = env_config if env_config is not None else {}
        self.episode_len = int(self.env_config.get("episode_len", 5))
        self.end = self.env_config.get("end", "terminated")
        if self.end not in ("terminated", "truncated"):
            raise ValueError(f"end must be 'terminated' or 'truncated', got {self.end!r}")
        self.rewards = [float(r) for r in self.env_config.get("rewards", [1.0])]
        self.reward_is_episode_index = bool(self.env_config.get("reward_is_episode_index", False))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0
        self.num_resets = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._t, self.num_resets], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        self.num_resets += 1
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        last = self._t >= self.episode_len
        if self.reward_is_episode_index:
            reward = float(self.num_resets) if last else 0.0
        else:
            reward = self.rewards[(self._t - 1) % len(self.rewards)]
        terminated = last and self.end == "terminated"
        truncated = last and self.end == "truncated"
        return self._obs(), reward, terminated, truncated, {"t": self._t}


class ActionRecordingEnv(gym.Env):
    """Box actions with bounds [low, high] (default [2, 4]); records every action it gets.

    env_config: low, high (floats), dim (action size, default 1), episode_len (default 10).
    Observation: a constant vector [0.5]; reward 0.
    """

    def __init__(self, env_config: Any = None) -> None:
        cfg = env_config if env_config is not None else {}
        low, high = float(cfg.get("low", 2.0)), float(cfg.get("high", 4.0))
        dim = int(cfg.get("dim", 1))
        self.episode_len = int(cfg.get("episode_len", 10))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Box(low, high, (dim,), np.float32)
        self.received: list = []
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.5], np.float32), {}

    def step(self, action):
        self.received.append(np.array(action, dtype=np.float64).copy())
        self._t += 1
        return np.array([0.5], np.float32), 0.0, self._t >= self.episode_len, False, {}


class DiscreteObsEnv(gym.Env):
    """Discrete(n) observations (default n=4): the observation is t % n; terminates after
    `episode_len` (default 6) steps; reward 1 per step."""

    def __init__(self, env_config: Any = None) -> None:
        cfg = env_config if env_config is not None else {}
        self.n = int(cfg.get("n", 4))
        self.episode_len = int(cfg.get("episode_len", 6))
        self.observation_space = gym.spaces.Discrete(self.n)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return 0, {}

    def step(self, action):
        self._t += 1
        return self._t % self.n, 1.0, self._t >= self.episode_len, False, {}


class DictObsEnv(gym.Env):
    """Dict observation {"pos": Box(2), "mode": Discrete(3)}; 4-step episodes."""

    def __init__(self, env_config: Any = None) -> None:
        self.observation_space = gym.spaces.Dict({
            "pos": gym.spaces.Box(-10.0, 10.0, (2,), np.float32),
            "mode": gym.spaces.Discrete(3),
        })
        self.action_space = gym.spaces.Discrete(3)
        self._t = 0

    def _obs(self):
        return {"pos": np.array([self._t, -self._t], np.float32), "mode": self._t % 3}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        return self._obs(), float(action), self._t >= 4, False, {}


class TupleObsEnv(gym.Env):
    """Tuple observation (Discrete(2), Box(3)); 3-step episodes; Box(2) actions."""

    def __init__(self, env_config: Any = None) -> None:
        self.observation_space = gym.spaces.Tuple((
            gym.spaces.Discrete(2),
            gym.spaces.Box(-5.0, 5.0, (3,), np.float32),
        ))
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._t = 0

    def _obs(self):
        return (self._t % 2, np.full(3, self._t, np.float32))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        return self._obs(), 0.0, self._t >= 3, False, {}


class ObsRecorder(gym.Wrapper):
    """Records every observation the wrapped env returns (from reset and step)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seen: list = []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.seen.append(np.array(obs, dtype=np.float64))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.seen.append(np.array(obs, dtype=np.float64))
        return obs, reward, terminated, truncated, info


def recorded_cartpole(env_config: Any = None) -> ObsRecorder:
    """CartPole-v1 wrapped in an ObsRecorder (an env creator)."""
    return ObsRecorder(gym.make("CartPole-v1"))


def make_worker(env: Any, config: dict | None = None, trainer_cls: type | None = None):
    """A local RolloutWorker for `env` (id, class, registered name or creator function) under `trainer_cls`'s
    defaults (default PPO) merged with `config` and validated, as a trainer would build it."""
    from rlfleet.config import validate_config
    from rlfleet.env.registry import resolve_env
    from rlfleet.rollout.rollout_worker import RolloutWorker

    if trainer_cls is None:
        from rlfleet.algorithms.ppo import PPOTrainer as trainer_cls
    # A plain function is used as the env creator itself (a trainer needs register_env).
    creator = env if callable(env) and not isinstance(env, type) else resolve_env(env)[1]
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, dict(config or {}))
    validate_config(cfg)
    return RolloutWorker(env_creator=creator, policy_class=trainer_cls._policy_class, config=cfg)


BOX3 = spaces.Box(-1.0, 1.0, (3,), np.float32)


class FaultyEnv(gym.Env):
    """Box(3,) observations in [-1, 1], episodes of `episode_len` (5) steps, reward 1.

    The sub-env with `vector_index == bad_index` (0) misbehaves at step `at` (3; 0: its
    reset) of its `episode`-th episode (1): `fault` is "shape", "nan_obs", "inf_obs",
    "bounds", "near_bounds" (outside by less than the tolerance), "dtype", "nan_reward",
    "inf_reward", "raise", "old_api". With `marker` (a file path), it misbehaves instead
    at step `at` of any episode while that file exists, and consumes it (exactly once
    over all processes).
    """

    def __init__(self, config=None):
        config = config if config is not None else {}
        self.fault = config.get("fault")
        self.at = int(config.get("at", 3))
        self.episode = int(config.get("episode", 1))
        self.marker = config.get("marker")
        self.bad = (getattr(config, "vector_index", 0) == int(config.get("bad_index", 0))
                    and getattr(config, "worker_index", 0) >= int(config.get("min_worker", 0)))
        self.episode_len = int(config.get("episode_len", 5))
        self.observation_space = BOX3
        self.action_space = spaces.Discrete(2)
        self._episodes = 0
        self._t = 0

    def _now(self) -> bool:
        if not self.bad or self._t != self.at:
            return False
        if self.marker is None:
            return self._episodes == self.episode
        try:
            os.rename(self.marker, f"{self.marker}.{os.getpid()}")  # atomic: one process wins
        except FileNotFoundError:
            return False
        return True

    def _misbehave(self, obs, reward):
        fault = self.fault
        if fault == "raise":
            raise ZeroDivisionError("boom")
        if fault == "shape":
            obs = np.zeros(5, np.float32)
        elif fault == "nan_obs":
            obs[1] = np.nan
        elif fault == "inf_obs":
            obs[1] = -np.inf
        elif fault == "bounds":
            obs[2] = 1.5
        elif fault == "near_bounds":
            obs[2] = 1.0 + BOX_TOLERANCE / 10
        elif fault == "dtype":
            obs = obs.astype(np.complex64)
        elif fault == "nan_reward":
            reward = float("nan")
        elif fault == "inf_reward":
            reward = float("inf")
        return obs, reward

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._episodes += 1
        self._t = 0
        obs = np.full(3, 0.5, np.float32)
        if self._now():
            obs, _ = self._misbehave(obs, 0.0)
        return obs, {}

    def step(self, action):
        self._t += 1
        obs, reward = np.full(3, 0.5, np.float32), 1.0
        if self._now():
            if self.fault == "old_api":
                return obs, reward, False, {}
            obs, reward = self._misbehave(obs, reward)
        return obs, reward, self._t >= self.episode_len, False, {}
