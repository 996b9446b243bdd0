"""Envs written for the old gym API (0.21-0.26) and the reference's multi-agent `dones` run
unchanged, with one warning (issue 26; rlfleet/env/old_api.py)."""
from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np
import pytest

import rlfleet.env.old_api as old_api
from rlfleet.algorithms.pg.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env.multi_agent_env import MultiAgentEnv
from rlfleet.env.old_api import OldGymEnv, adapt_old_api


class OldGymCorridor:
    """A gym 0.21-style env (no gymnasium base class): walk right 5 cells; reset() -> obs,
    seed(s), step() -> (obs, reward, done, info); a time limit of 20 steps marked as the old
    TimeLimit did."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0.0, 5.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.seeds = []
        self.pos, self.t = 0, 0

    def seed(self, seed=None):
        self.seeds.append(seed)
        return [seed]

    def reset(self):
        self.pos, self.t = 0, 0
        return np.array([self.pos], np.float32)

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        self.t += 1
        at_goal = self.pos >= 5
        timeout = self.t >= 20 and not at_goal
        info = {"TimeLimit.truncated": True} if timeout else {}
        return np.array([self.pos], np.float32), 1.0 if at_goal else -0.1, at_goal or timeout, info


class OldCorridorOnGymnasium(OldGymCorridor, gym.Env):
    """The same old-API env where only the import was switched to gymnasium."""


class OldTwoAgents(MultiAgentEnv):
    """The reference's MultiAgentEnv API: reset() -> obs dict; step() -> 4 dicts, dones with
    "__all__"; the episode ends after 4 steps."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.possible_agents = ["a", "b"]
        self.t = 0

    def reset(self):
        self.t = 0
        return {aid: np.zeros(2, np.float32) for aid in self.possible_agents}

    def step(self, action_dict):
        self.t += 1
        done = self.t >= 4
        obs = {aid: np.full(2, 0.1 * self.t, np.float32) for aid in action_dict}
        rewards = {aid: float(a) for aid, a in action_dict.items()}
        dones = {aid: done for aid in action_dict}
        dones["__all__"] = done
        return obs, rewards, dones, {aid: {} for aid in action_dict}


class NewCorridor(gym.Env):
    """A Gymnasium env: its methods are given back after their first call."""

    observation_space = gym.spaces.Box(0.0, 5.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(old_api, "_warned", {"single": False, "multi": False})


@pytest.mark.parametrize("env_class", [OldGymCorridor, OldCorridorOnGymnasium])
def test_old_single_agent_api_is_adapted_with_one_warning(env_class, caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.env.old_api"):
        envs = [adapt_old_api(env_class()) for _ in range(2)]
        for env in envs:
            obs, info = env.reset(seed=7)
            assert obs.shape == (1,) and info == {} and env.seeds == [7]
            obs, reward, terminated, truncated, info = env.step(0)
            assert (terminated, truncated) == (False, False)
    assert caplog.text.count("old gym API") == 1
    env = envs[0]
    env.reset()
    for _ in range(5):
        out = env.step(1)
    assert out[2:4] == (True, False)  # reached the goal: terminated
    env.reset()
    for _ in range(20):
        out = env.step(0)
    assert out[2:4] == (False, True)  # the old TimeLimit's done: truncated (bootstrapped)
    if env_class is OldCorridorOnGymnasium:
        assert type(env) is OldCorridorOnGymnasium  # still the user's object
    else:  # not a gym.Env at all: inside a Gymnasium env that reads its attributes from it
        assert isinstance(env, OldGymEnv) and isinstance(env.unwrapped, OldGymEnv) and env.seeds == [7]


def test_old_multi_agent_dones_are_adapted_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.env.old_api"):
        env = adapt_old_api(OldTwoAgents())
        obs, infos = env.reset(seed=0)
        assert set(obs) == {"a", "b"} and infos == {}
        for _ in range(4):
            obs, rewards, terminateds, truncateds, infos = env.step({"a": 1, "b": 0})
        env.reset()
        env.step({"a": 1, "b": 1})
    assert terminateds == {"a": True, "b": True, "__all__": True}
    assert truncateds == {"a": False, "b": False, "__all__": False}
    assert caplog.text.count("RLlib 1.x's API") == 1


def test_new_api_envs_get_their_own_methods_back_and_no_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.env.old_api"):
        env = adapt_old_api(NewCorridor())
        assert "reset" in vars(env) and "step" in vars(env)
        assert env.reset(seed=1)[1] == {} and len(env.step(0)) == 5
    assert "reset" not in vars(env) and "step" not in vars(env)  # no cost per call after the first
    assert caplog.text == ""
    made = gym.make("CartPole-v1")
    assert adapt_old_api(made) is made and "step" not in vars(made)  # Gymnasium's classes: untouched


@pytest.mark.parametrize("env_class", [OldGymCorridor, OldCorridorOnGymnasium])
def test_an_old_gym_env_trains_unchanged(env_class, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.env.old_api"):
        trainer = PPOTrainer(env=env_class, logdir=str(tmp_path), config={
            "seed": 0, "num_envs_per_worker": 2, "train_batch_size": 100, "rollout_fragment_length": 50,
            "sgd_minibatch_size": 50, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}})
        try:
            result = trainer.train()
        finally:
            trainer.stop()
    assert result["timesteps_total"] == 100 and result["episodes_this_iter"] > 0
    assert caplog.text.count("old gym API") == 1


def test_an_old_multi_agent_env_trains_unchanged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.env.old_api"):
        trainer = PGTrainer(env=OldTwoAgents, logdir=str(tmp_path), config={
            "seed": 0, "train_batch_size": 40, "rollout_fragment_length": 20, "model": {"fcnet_hiddens": [8]}})
        try:
            result = trainer.train()
        finally:
            trainer.stop()
    assert result["episodes_this_iter"] >= 4 and result["episode_len_mean"] == 4
    assert caplog.text.count("RLlib 1.x's API") == 1


def test_an_old_gym_env_runs_as_remote_envs_and_in_remote_workers(ray_session, tmp_path):
    # The adapting creator travels with the trainer's env creator to other processes.
    trainer = PPOTrainer(env=OldGymCorridor, logdir=str(tmp_path), config={
        "seed": 0, "num_workers": 1, "remote_worker_envs": True, "num_envs_per_worker": 2,
        "train_batch_size": 100, "rollout_fragment_length": 50, "sgd_minibatch_size": 50, "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]}})
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["timesteps_total"] == 100 and result["episodes_this_iter"] > 0
