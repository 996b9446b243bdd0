"""Agent groups (`MultiAgentEnv.with_agent_groups`): members acting as one agent with Tuple
observations and actions and summed rewards, through the samplers, checkpoints, evaluation and
remote workers."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlfleet import register_env
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env.examples import TwoStepGame
from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
from rlfleet.env.multi_agent_env import ALL, GROUP_INFO, GROUP_REWARDS, MultiAgentEnv

register_env("grouped_two_step", lambda cfg: TwoStepGame().with_agent_groups({"team": [0, 1]}))
FAST_PPO = {"train_batch_size": 200, "sgd_minibatch_size": 50, "num_sgd_iter": 10, "rollout_fragment_length": 100,
            "lr": 1e-3}


def test_group_observes_a_tuple_acts_with_one_and_gets_the_summed_reward():
    env = TwoStepGame().with_agent_groups({"team": [1, 0]})  # the tuples follow the listed order
    assert env.get_agent_ids() == {"team"}
    assert env.observation_space == gym.spaces.Tuple([TwoStepGame.observation_space] * 2)
    assert env.action_space == gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2)
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["team"] and obs["team"][0][4] == 1.0 and obs["team"][1][3] == 1.0
    env.step({"team": (1, 1)})  # agent 0 (second in the tuple) picks state 2
    obs, rewards, terms, truncs, infos = env.step({"team": (1, 1)})
    assert rewards == {"team": 8.0} and terms["team"] and terms[ALL] and not truncs["team"]
    assert infos["team"][GROUP_REWARDS] == [4.0, 4.0] and infos["team"][GROUP_INFO] == [{}, {}]


def test_ungrouped_agents_pass_through_and_early_finishers_keep_their_last_observation():
    env = MultiAgentCartPole({"num_agents": 3}).with_agent_groups({"pair": [0, 1]})
    assert env.get_agent_ids() == {2, "pair"}
    assert env.observation_space is None  # two kinds of agents: spaces per agent
    assert env.observation_space_for(2).shape == (4,) and len(env.observation_space_for("pair").spaces) == 2
    obs, _ = env.reset(seed=3)
    assert set(obs) == {2, "pair"} and len(obs["pair"]) == 2
    previous, checked, done = obs["pair"], 0, set()
    for t in range(500):
        # Member 0 always pushes left (its pole falls within a few steps); member 1 alternates.
        actions = {aid: (0, t % 2) if aid == "pair" else t % 2 for aid in obs if aid not in done}
        obs, rewards, terms, truncs, infos = env.step(actions)
        done |= {aid for aid in obs if terms.get(aid) or truncs.get(aid)}
        if "pair" in obs and infos["pair"][GROUP_REWARDS][0] == 0.0:  # member 0 finished earlier
            assert rewards["pair"] == 1.0  # only member 1 still balances
            np.testing.assert_array_equal(obs["pair"][0], previous[0])  # member 0's last observation
            checked += 1
        if "pair" in obs:
            previous = obs["pair"]
        if terms.get("pair") or truncs.get("pair"):
            break
    assert checked > 0 and (terms["pair"] or truncs["pair"])


class _Lopsided(MultiAgentEnv):
    possible_agents = ["a", "b"]
    observation_space = gym.spaces.Discrete(3)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return {"a": 0}, {}  # "b" is missing

    def step(self, action_dict):
        raise AssertionError("not reached")


def test_bad_groups_and_bad_steps_name_the_problem():
    with pytest.raises(ValueError, match="agent 0 is in groups 'x' and 'y'"):
        TwoStepGame().with_agent_groups({"x": [0, 1], "y": [0]})
    with pytest.raises(ValueError, match="group 'x' has no members"):
        TwoStepGame().with_agent_groups({"x": []})
    with pytest.raises(ValueError, match="group id 1 is also an agent"):
        TwoStepGame().with_agent_groups({1: [0]})
    with pytest.raises(ValueError, match="gym.spaces.Tuple"):
        TwoStepGame().with_agent_groups({"t": [0, 1]}, obs_space=gym.spaces.Discrete(2))
    env = TwoStepGame().with_agent_groups({"team": [0, 1]})
    env.reset()
    with pytest.raises(ValueError, match=r"group 'team': its action must be a tuple of 2 actions"):
        env.step({"team": 1})
    with pytest.raises(ValueError, match=r"gave observations for \['a'\] but not for \['b'\]"):
        _Lopsided().with_agent_groups({"g": ["a", "b"]}).reset()


def test_a_group_learns_the_two_step_games_joint_optimum():
    """Independent learners settle on the safe 7; the group, acting jointly, finds the 8."""
    trainer = PPOTrainer(env="grouped_two_step", config={"seed": 0, **FAST_PPO})
    try:
        for _ in range(12):
            result = trainer.train()
        assert result["episode_reward_mean"] > 7.5, result["episode_reward_mean"]
        action = trainer.compute_single_action(TwoStepGame().with_agent_groups({"team": [0, 1]}).reset()[0]["team"],
                                               explore=False)
        assert tuple(int(a) for a in action) in {(1, 0), (1, 1)}  # agent 0 heads for state 2
    finally:
        trainer.stop()


def test_grouped_env_through_remote_workers_checkpoints_and_evaluation(ray_session, tmp_path):
    config = {"seed": 1, **FAST_PPO, "num_workers": 1, "evaluation_interval": 1, "evaluation_duration": 4}
    trainer = PPOTrainer(env="grouped_two_step", config=config)
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 200 and "evaluation" in result
        path = trainer.save(str(tmp_path))
        weights = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    restored = PPOTrainer(env="grouped_two_step", config=dict(config, num_workers=0))
    try:
        restored.restore(path)
        for k, v in restored.get_policy().get_weights().items():
            np.testing.assert_array_equal(v, weights[k], err_msg=k)
        assert restored.train()["episode_reward_mean"] > 0
    finally:
        restored.stop()
