"""One RolloutWorker, one Sampler protocol, one set of episode-end rules (issue 10)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv
from rlfleet.policy.policy_map import PolicyMap
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.multi_agent_sampler import MultiAgentSampler
from rlfleet.rollout.sampler import SingleAgentSampler
from rlfleet.rollout.sampler_api import Sampler
from tests.envs import CountingEnv, make_worker

SB = SampleBatch


def _ma(**multiagent):
    return {"multiagent": dict(multiagent)}


def _two_policy_mapping(aid, episode, worker, **kw):
    return f"p{aid}"


# --- episode-end rules -------------------------------------------------------------------------
@pytest.mark.parametrize("rules, terminated, truncated, length, expected", [
    (EpisodeRules(), True, False, 5, (True, True, True)),
    (EpisodeRules(), False, True, 5, (True, False, True)),
    (EpisodeRules(), False, False, 5, (False, False, False)),
    (EpisodeRules(horizon=5), False, False, 5, (True, True, True)),
    (EpisodeRules(horizon=5, no_done_at_end=True), False, False, 5, (True, False, True)),
    (EpisodeRules(horizon=5), False, False, 4, (False, False, False)),
    (EpisodeRules(horizon=5, soft_horizon=True), False, False, 5, (True, True, False)),
    (EpisodeRules(horizon=5, soft_horizon=True, no_done_at_end=True), False, False, 5, (True, False, False)),
    (EpisodeRules(no_done_at_end=True), True, False, 2, (True, False, True)),
    # The env's own end wins over the horizon it coincides with.
    (EpisodeRules(horizon=5, soft_horizon=True), True, False, 5, (True, True, True)),
])
def test_episode_rules_table(rules, terminated, truncated, length, expected):
    assert tuple(rules.end(terminated, truncated, length)) == expected


def test_episode_rules_from_config():
    rules = EpisodeRules.from_config({"horizon": 7, "soft_horizon": True, "no_done_at_end": False})
    assert rules == EpisodeRules(7, True, False)
    assert EpisodeRules.from_config({}) == EpisodeRules()


@pytest.mark.parametrize("horizon, soft, no_done", [(3, False, False), (3, True, False), (3, True, True),
                                                    (None, False, True)])
def test_both_samplers_end_episodes_alike(horizon, soft, no_done):
    """The fast path and the general path (a single-agent env under a mapping function) give
    the same episode ends and terminal flags under every rule."""
    config = {"horizon": horizon, "soft_horizon": soft, "no_done_at_end": no_done, "rollout_fragment_length": 10,
              "env_config": {"episode_len": 5}}
    fast = make_worker(CountingEnv, dict(config))
    general = make_worker(CountingEnv, dict(config, **_ma(policy_mapping_fn=lambda aid, ep, worker, **kw:
                                                          DEFAULT_POLICY_ID)))
    assert isinstance(fast.sampler, SingleAgentSampler) and isinstance(general.sampler, MultiAgentSampler)
    a = fast.sample()
    b = general.sample().policy_batches[DEFAULT_POLICY_ID]
    for key in (SB.DONES, SB.TERMINATEDS, SB.TRUNCATEDS, SB.REWARDS, SB.T):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert [m.episode_length for m in fast.get_metrics()] == [m.episode_length for m in general.get_metrics()]


# --- one worker, one protocol ------------------------------------------------------------------
@pytest.mark.parametrize("env, config, sampler_cls", [
    (CountingEnv, {}, SingleAgentSampler),
    (MultiAgentCartPole, {"env_config": {"num_agents": 2},
                          **_ma(policies={"p0", "p1"}, policy_mapping_fn=_two_policy_mapping)}, MultiAgentSampler),
])
def test_both_samplers_follow_the_protocol_and_carry_state(env, config, sampler_cls):
    worker = make_worker(env, config)
    assert isinstance(worker.policy_map, PolicyMap)
    assert isinstance(worker.sampler, sampler_cls) and isinstance(worker.sampler, Sampler)
    worker.sample()
    state = worker.get_state()["sampler"]
    assert state["episodes_started"] >= 1
    other = make_worker(env, config)
    other.set_state(worker.get_state())
    assert other.sampler.get_state() == state


def test_one_policy_is_a_policy_map_of_one():
    worker = make_worker(CountingEnv, {})
    assert list(worker.policy_map) == [DEFAULT_POLICY_ID] and worker.policies_to_train == [DEFAULT_POLICY_ID]


def test_general_path_clips_atari_style_rewards_like_the_fast_path():
    """`clip_rewards: None` sign-clips on Atari only; `True` clips on both paths alike."""
    config = {"clip_rewards": True, "rollout_fragment_length": 4, "env_config": {"episode_len": 100}}
    fast = make_worker(CountingEnv, dict(config))
    general = make_worker(CountingEnv, dict(config, **_ma(policy_mapping_fn=lambda aid, ep, worker, **kw:
                                                          DEFAULT_POLICY_ID)))
    assert fast.sampler.settings.reward_clipper is np.sign
    assert general.sampler.settings.reward_clipper is np.sign
    np.testing.assert_array_equal(fast.sample()[SB.REWARDS],
                                  general.sample().policy_batches[DEFAULT_POLICY_ID][SB.REWARDS])


def test_switch_to_the_general_path_keeps_episode_ids_unique():
    worker = make_worker(CountingEnv, {"rollout_fragment_length": 5, "env_config": {"episode_len": 3}})
    first = worker.sample()
    worker.add_policy("other", policy_mapping_fn=lambda aid, ep, worker, **kw: "other")
    assert isinstance(worker.sampler, MultiAgentSampler)
    second = worker.sample()
    assert isinstance(second, MultiAgentBatch)
    ids_before = set(first[SB.EPS_ID].tolist())
    ids_after = set(second.policy_batches["other"][SB.EPS_ID].tolist())
    assert ids_after and not ids_before & ids_after


def test_default_mapping_fn_keeps_the_fast_path():
    worker = make_worker(CountingEnv, {})
    worker.set_policy_mapping_fn(worker.policy_mapping_fn)
    assert isinstance(worker.sampler, SingleAgentSampler)


# --- remove_policy with episodes in flight --------------------------------------------------------
class TurnTakingEnv(MultiAgentEnv):
    """Agents 0 and 1 alternate (only one observes per step), 30-step episodes; agent 2
    joins at step 10. Exercises open actions and late joiners when a policy goes away."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    possible_agents = [0, 1, 2]

    def __init__(self, config=None):
        self.k = 0

    def _obs(self):
        return np.array([self.k / 30.0, 0.5], np.float32)

    def reset(self, *, seed=None, options=None):
        self.k = 0
        return {0: self._obs()}, {}

    def step(self, action_dict):
        self.k += 1
        nxt = [self.k % 2] + ([2] if self.k >= 10 else [])
        obs = {a: self._obs() for a in nxt}
        rew = {a: 1.0 for a in action_dict}
        over = self.k >= 30
        return obs, rew, {ALL: over}, {ALL: False}, {}


@pytest.mark.parametrize("env, env_config", [(MultiAgentCartPole, {"num_agents": 2}), (TurnTakingEnv, {})])
def test_ppo_two_policies_remove_policy_with_episodes_in_flight(env, env_config):
    trainer = PPOTrainer(env=env, config={
        "seed": 1, "env_config": env_config, "num_envs_per_worker": 2, "rollout_fragment_length": 16,
        "train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]},
        "multiagent": {"policies": {"p0", "p1", "p2"}, "policy_mapping_fn": lambda aid, ep, worker, **kw: f"p{aid}"},
    })
    try:
        trainer.train()
        local = trainer.workers.local_worker()
        running = [ep for ep in local.sampler._episodes if ep is not None and ep.length > 0]
        assert running and any("p1" in ep.policies_in_use() for ep in running), "p1 should be in use mid-episode"
        trainer.remove_policy("p1", policy_mapping_fn=lambda aid, ep, worker, **kw: "p0")
        for ep in running:
            assert "p1" not in ep.policies_in_use()
            assert all(ep.policy_for(a) in local.policy_map for a in ep.get_agents())
        steps = trainer.train()["timesteps_total"]
        for _ in range(3):
            result = trainer.train()
            assert "p1" not in result["info"]["learner"]
            assert set(result["info"]["learner"]) <= {"p0", "p2"}
            assert result["timesteps_total"] > steps
            steps = result["timesteps_total"]
    finally:
        trainer.stop()


def test_remove_policy_without_a_mapping_that_avoids_it_is_a_clear_error():
    worker = make_worker(MultiAgentCartPole, {"env_config": {"num_agents": 2}, "rollout_fragment_length": 3,
                                              **_ma(policies={"p0", "p1"}, policy_mapping_fn=_two_policy_mapping)})
    worker.sample()
    with pytest.raises(ValueError, match=r"remove_policy\('p1'\).*policy_mapping_fn"):
        worker.remove_policy("p1")
