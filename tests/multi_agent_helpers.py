"""Multi-agent envs and workers shared by the rollout and env tests: agents that join and
leave (`JoinLeaveEnv`), agents that end at staggered steps (`StaggeredEnv`), and RolloutWorkers
built from small PG and PPO configs."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import gymnasium as gym
import numpy as np

from rlfleet.algorithms.pg.pg import PGTorchPolicy
from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
from rlfleet.config import (ALLOW_UNKNOWN_SUBKEYS, COMMON_CONFIG, OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
                            merge_configs, validate_config)
from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv
from rlfleet.rollout.rollout_worker import RolloutWorker


class JoinLeaveEnv(MultiAgentEnv):
    """Agent "a" acts for 6 env steps; "b" joins with the observation of step 2 (so it acts
    in steps 3 and 4) and leaves (terminated) at step 4. Observation: [step, agent code]."""

    observation_space = gym.spaces.Box(0.0, 1000.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    possible_agents = ["a", "b"]

    def __init__(self, config=None):
        self.k = 0

    def _obs(self, code):
        return np.array([self.k, code], np.float32)

    def reset(self, *, seed=None, options=None):
        self.k = 0
        return {"a": self._obs(0)}, {"a": {}}

    def step(self, action_dict):
        self.k += 1
        assert "a" in action_dict
        assert ("b" in action_dict) == (self.k in (3, 4)), (self.k, action_dict)
        obs, rew, term = {"a": self._obs(0)}, {"a": 1.0}, {"a": self.k == 6}
        if "b" in action_dict:
            rew["b"] = 10.0
        if 2 <= self.k <= 4:
            obs["b"] = self._obs(1)
            term["b"] = self.k == 4
        term[ALL] = self.k == 6
        return obs, rew, term, {ALL: False}, {}


def pg_config(**overrides: Any) -> dict:
    """A small PG config (6-step fragments, one 8-unit layer) with `overrides` merged one level deep."""
    cfg = {"seed": 0, "num_envs_per_worker": 1, "rollout_fragment_length": 6, "train_batch_size": 6,
           "model": {"fcnet_hiddens": [8]}, "lr": 0.01}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def worker_for(env_cls: type, **overrides: Any) -> RolloutWorker:
    """A PG RolloutWorker on `env_cls` with `pg_config(**overrides)`."""
    config = merge_configs(COMMON_CONFIG, pg_config(**overrides), False, ALLOW_UNKNOWN_SUBKEYS,
                           OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES)
    validate_config(config)
    return RolloutWorker(env_creator=lambda ctx: env_cls(ctx), policy_class=PGTorchPolicy, config=config)


TWO_POLICIES = {"policies": {"pa", "pb"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}


class StaggeredEnv(MultiAgentEnv):
    """Five agents with string ids on one policy, each terminated at its own step (3-7), so
    episodes close rows of several agents at once in an order the sampler chooses."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    possible_agents = [f"agent_{k}" for k in range(5)]

    def __init__(self, config=None):
        self.k, self.live = 0, []

    def _obs(self):
        return {a: np.array([self.k / 10, i / 10], np.float32) for i, a in enumerate(self.possible_agents)
                if a in self.live}

    def reset(self, *, seed=None, options=None):
        self.k, self.live = 0, list(self.possible_agents)
        return self._obs(), {}

    def step(self, action_dict):
        self.k += 1
        ending = [a for i, a in enumerate(self.possible_agents) if a in self.live and self.k == 3 + i % 3]
        rew = {a: float(action_dict[a]) for a in self.live}
        term = {a: a in ending for a in self.live}
        self.live = [a for a in self.live if a not in ending]
        obs = {a: np.array([self.k / 10, 0.5], np.float32) for a in ending}
        obs.update(self._obs())
        term[ALL] = not self.live
        return obs, rew, term, {ALL: False}, {}


def shared_ppo_worker(creator: Callable, num_envs: int = 2, fragment: int = 30, seed: int = 0,
                      policies: Sequence[str] = ("shared",), mapping: Optional[Callable] = None,
                      multiagent_extra: Optional[dict] = None, **extra: Any) -> RolloutWorker:
    """A PPO RolloutWorker on `creator`'s multi-agent env; every agent on the policy "shared"
    unless `mapping` says otherwise (the vectorised multi-agent tests)."""
    mapping = mapping or (lambda aid, episode, worker, **kw: "shared")
    config = merge_configs(DEFAULT_CONFIG, dict(
        num_envs_per_worker=num_envs, rollout_fragment_length=fragment, seed=seed,
        multiagent={"policies": set(policies), "policy_mapping_fn": mapping, **(multiagent_extra or {})}, **extra))
    validate_config(config)
    return RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config)
