"""Multi-agent training: MultiAgentEnv, the multi-agent sampler, policy mapping,
policies_to_train, add/remove_policy at run time, per-policy results, PettingZoo."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.pg.pg import PGTorchPolicy, PGTrainer
from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
from rlfleet.env.registry import register_env
from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv, make_multi_agent
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from tests.helpers import REPO_ROOT, load_tuned_example
from tests.multi_agent_helpers import TWO_POLICIES, JoinLeaveEnv, pg_config, worker_for

SB = SampleBatch


# --- sampler: joining / leaving agents, step counting ---------------------------------------
def test_agents_joining_and_leaving_complete_episode():
    w = worker_for(JoinLeaveEnv, batch_mode="complete_episodes", multiagent=TWO_POLICIES)
    batch = w.sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.env_steps() == 6 and batch.agent_steps() == 8
    a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
    np.testing.assert_array_equal(a[SB.T], np.arange(6))
    np.testing.assert_array_equal(a[SB.OBS][:, 0], np.arange(6))
    np.testing.assert_array_equal(a[SB.NEXT_OBS][:, 0], np.arange(1, 7))
    np.testing.assert_array_equal(a[SB.TERMINATEDS], [False] * 5 + [True])
    # b: first observation after step 2, acts in steps 3 and 4, terminated at 4.
    np.testing.assert_array_equal(b[SB.T], [2, 3])
    np.testing.assert_array_equal(b[SB.OBS], [[2, 1], [3, 1]])
    np.testing.assert_array_equal(b[SB.NEXT_OBS], [[3, 1], [4, 1]])
    np.testing.assert_array_equal(b[SB.REWARDS], [10.0, 10.0])
    np.testing.assert_array_equal(b[SB.TERMINATEDS], [False, True])
    np.testing.assert_array_equal(b[SB.DONES], [False, True])
    assert set(a[SB.AGENT_INDEX]) == {0} and set(b[SB.AGENT_INDEX]) == {1}
    assert a[SB.EPS_ID][0] == b[SB.EPS_ID][0]
    # PG's returns: b's trajectory ended terminally, so no bootstrap: 10 + 0.99 * 10.
    np.testing.assert_allclose(b[SB.ADVANTAGES], [10 + 0.99 * 10, 10], rtol=1e-6)
    (m,) = w.get_metrics()
    assert m.episode_length == 6 and m.episode_reward == 26.0
    assert m.agent_rewards == {("a", "pa"): 6.0, ("b", "pb"): 20.0}


@pytest.mark.parametrize("count_by, env_steps, agent_steps", [("env_steps", 5, 7), ("agent_steps", 4, 6)])
def test_count_steps_by_sets_fragment_size(count_by, env_steps, agent_steps):
    w = worker_for(JoinLeaveEnv, rollout_fragment_length=5,
                   multiagent={**TWO_POLICIES, "count_steps_by": count_by})
    batch = w.sample()
    assert (batch.env_steps(), batch.agent_steps()) == (env_steps, agent_steps)
    # The cut is not an episode end: the last rows are neither done nor terminal.
    assert not batch.policy_batches["pa"][SB.DONES][-1]


def test_count_steps_by_agent_steps_sizes_the_train_batch():
    trainer = PGTrainer(env=JoinLeaveEnv, config=pg_config(
        train_batch_size=12, rollout_fragment_length=3,
        multiagent={**TWO_POLICIES, "count_steps_by": "agent_steps"}), logdir=None)
    result = trainer.train()
    assert result["info"]["num_agent_steps_sampled"] >= 12
    assert result["info"]["num_env_steps_sampled"] < result["info"]["num_agent_steps_sampled"]
    trainer.stop()


def test_observation_fn_reshapes_observations():
    seen = []

    def observation_fn(agent_obs, worker, base_env, policies, episode, **kwargs):
        seen.append((sorted(agent_obs), sorted(policies), episode.episode_id))
        return {aid: obs + (100.0 if aid == "b" else 0.0) for aid, obs in agent_obs.items()}

    w = worker_for(JoinLeaveEnv, batch_mode="complete_episodes",
                   multiagent={**TWO_POLICIES, "observation_fn": observation_fn})
    batch = w.sample()
    np.testing.assert_array_equal(batch.policy_batches["pb"][SB.OBS], [[102, 101], [103, 101]])
    np.testing.assert_array_equal(batch.policy_batches["pa"][SB.OBS][:, 0], np.arange(6))
    assert seen[0] == (["a"], ["pa", "pb"], seen[0][2]) and (["a", "b"], ["pa", "pb"], seen[0][2]) in seen


class RecordingPG(PGTorchPolicy):
    calls: list = []

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        RecordingPG.calls.append((self.policy_id, sample_batch[SB.AGENT_INDEX][0],
                                  {aid: (pol.policy_id, b.count) for aid, (pol, b) in other_agent_batches.items()},
                                  episode.last_observation_for("a")))
        return super().postprocess_trajectory(sample_batch, other_agent_batches, episode)


def test_other_agent_batches_reach_postprocess_trajectory():
    RecordingPG.calls = []
    policies = {"pa": (RecordingPG, None, None, None), "pb": (RecordingPG, None, None, {"gamma": 0.5})}
    w = worker_for(JoinLeaveEnv, batch_mode="complete_episodes",
                   multiagent={**TWO_POLICIES, "policies": policies})
    w.sample()
    calls = {c[0]: c for c in RecordingPG.calls}
    assert calls["pa"][2] == {"b": ("pb", 2)} and calls["pb"][2] == {"a": ("pa", 6)}
    np.testing.assert_array_equal(calls["pa"][3], [6, 0])  # episode accessors work in there
    assert w.policy_map["pb"].config["gamma"] == 0.5 and w.policy_map["pa"].config["gamma"] == 0.99


# --- policies, mapping, training --------------------------------------------------------------
def cartpole_config(**overrides):
    return pg_config(**{"env_config": {"num_agents": 2}, "rollout_fragment_length": 50,
                        "train_batch_size": 100, "multiagent": {
                            "policies": {"p0", "p1"},
                            "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"},
                        **overrides})


def test_policies_to_train_leaves_frozen_policy_bit_identical():
    cfg = cartpole_config()
    cfg["multiagent"]["policies_to_train"] = ["p0"]
    trainer = PGTrainer(env=MultiAgentCartPole, config=cfg)
    before = trainer.get_weights()
    result = trainer.train()
    after = trainer.get_weights()
    assert list(result["info"]["learner"]) == ["p0"]
    assert all(np.array_equal(before["p1"][k], after["p1"][k]) for k in before["p1"])
    assert any(not np.array_equal(before["p0"][k], after["p0"][k]) for k in before["p0"])
    # The frozen policy still acts: its agent's samples are there.
    assert result["policy_reward_mean"].keys() == {"p0", "p1"}
    trainer.stop()


def test_per_policy_rewards_and_compute_actions():
    trainer = PPOTrainer(env=MultiAgentCartPole, config=cartpole_config(
        sgd_minibatch_size=50, num_sgd_iter=1))
    result = trainer.train()
    assert set(result["policy_reward_mean"]) == set(result["policy_reward_min"]) == {"p0", "p1"}
    assert result["episode_reward_mean"] == pytest.approx(
        result["policy_reward_mean"]["p0"] + result["policy_reward_mean"]["p1"])
    assert len(result["hist_stats"]["policy_p0_reward"]) == len(result["hist_stats"]["episode_reward"])
    assert set(result["info"]["learner"]) == {"p0", "p1"}
    assert "kl" in result["info"]["learner"]["p1"]["learner_stats"]
    obs = {0: np.zeros(4, np.float32), 1: np.ones(4, np.float32) * 0.1}
    acts = trainer.compute_actions(obs, policy_id="p1", explore=False)
    assert set(acts) == {0, 1} and all(a in (0, 1) for a in acts.values())
    assert trainer.compute_single_action(obs[0], policy_id="p0", explore=False) in (0, 1)
    trainer.stop()


def test_single_agent_env_with_multi_agent_policies():
    trainer = PGTrainer(env="CartPole-v1", config=pg_config(multiagent={
        "policies": {"main": (None, None, None, {"lr": 0.001})},
        "policy_mapping_fn": lambda aid, episode, worker, **kw: "main"}))
    result = trainer.train()
    assert list(result["info"]["learner"]) == ["main"]
    assert trainer.get_policy("main").config["lr"] == 0.001
    trainer.stop()


@pytest.mark.parametrize("multiagent, message", [
    ({"policies": {"a": (None, None)}}, "the spec of policy 'a' is (None, None)"),
    ({"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, ep, worker, **kw: f"p{aid}",
      "policies_to_train": ["p2"]}, "'multiagent.policies_to_train': ['p2'] are not policies"),
    ({"policies": {"p0", "p1"}}, "'multiagent.policy_mapping_fn' is not set, and the policies ['p0', 'p1']"),
    ({"policies": {"p0"}, "policy_mapping_fn": lambda aid, ep, worker, **kw: "nope"},
     "The policy mapping returned 'nope', which is not a policy of this worker"),
    ({"policy_mapping_fn": 3}, "'multiagent.policy_mapping_fn': 3 is invalid; expected None or a function"),
])
def test_bad_multi_agent_config_errors(multiagent, message):
    with pytest.raises(ValueError) as info:
        trainer = PGTrainer(env=MultiAgentCartPole, config=pg_config(multiagent=multiagent))
        trainer.train()
    assert message in str(info.value)


class PerAgentSpaces(MultiAgentEnv):
    observation_spaces = {"x": gym.spaces.Box(-1, 1, (3,)), "y": gym.spaces.Box(-1, 1, (5,))}
    action_spaces = {"x": gym.spaces.Discrete(2), "y": gym.spaces.Discrete(4)}

    def __init__(self, config=None):
        pass


def test_spaces_inferred_per_agent_through_the_mapping():
    w = worker_for(PerAgentSpaces, multiagent={
        "policies": {"px", "py"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"})
    assert w.policy_map["px"].observation_space.shape == (3,) and w.policy_map["px"].action_space.n == 2
    assert w.policy_map["py"].observation_space.shape == (5,) and w.policy_map["py"].action_space.n == 4
    with pytest.raises(ValueError, match="Cannot infer the observation_space of policy 'pz'"):
        worker_for(PerAgentSpaces, multiagent={"policies": {"px", "pz"},
                                               "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"})


# --- add / remove policies at run time ----------------------------------------------------------
def test_add_policy_mid_training_then_remove_policy():
    cfg = cartpole_config(num_envs_per_worker=2, rollout_fragment_length=10, train_batch_size=40,
                          evaluation_interval=1, evaluation_num_episodes=1)
    cfg["multiagent"] = {"policies": {"p0"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: "p0"}
    trainer = PGTrainer(env=MultiAgentCartPole, config=cfg)
    trainer.train()
    local = trainer.workers.local_worker()
    running = [ep for ep in local.sampler._episodes if ep is not None]
    assert running, "episodes should be in flight (fragments cut them)"

    new = trainer.add_policy("p1", PGTorchPolicy, config={"lr": 0.05},
                             policy_mapping_fn=lambda aid, episode, worker, **kw: f"p{aid}")
    assert new is trainer.get_policy("p1") and new.config["lr"] == 0.05
    assert local.policies_to_train == ["p0", "p1"]
    eval_worker = trainer.evaluation_workers.local_worker()
    assert "p1" in eval_worker.policy_map
    # Running episodes keep the mapping they started with.
    assert all(ep.policy_for(1) == "p0" for ep in running)
    w_before = trainer.get_weights(["p1"])["p1"]
    seen_p1 = False
    for _ in range(20):
        result = trainer.train()
        if "p1" in result["info"]["learner"]:
            seen_p1 = True
            break
    assert seen_p1, "the new policy should act (and learn) once new episodes start"
    assert any(not np.array_equal(w_before[k], v) for k, v in trainer.get_weights(["p1"])["p1"].items())
    assert all(ep.policy_for(1) == "p1" for ep in local.sampler._episodes if ep is not None and ep.length < 3)

    trainer.remove_policy("p1", policy_mapping_fn=lambda aid, episode, worker, **kw: "p0")
    assert "p1" not in local.policy_map and "p1" not in eval_worker.policy_map
    assert local.policies_to_train == ["p0"]
    for _ in range(3):
        result = trainer.train()  # episodes that still used p1 finish with it
        assert list(result["info"]["learner"]) == ["p0"]
    assert trainer.get_policy("p1") is None
    trainer.stop()


def test_add_policy_on_a_single_agent_trainer():
    trainer = PGTrainer(env="CartPole-v1", config=pg_config(rollout_fragment_length=20, train_batch_size=20))
    trainer.train()
    trainer.add_policy("other", policy_mapping_fn=lambda aid, episode, worker, **kw: "other",
                       policies_to_train=["other"])
    result = trainer.train()
    assert list(result["info"]["learner"]) == ["other"]
    trainer.stop()


# --- learning --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_policies_learn_independently_on_two_cartpoles():
    trainer = PPOTrainer(env=MultiAgentCartPole, config={
        "seed": 3, "num_envs_per_worker": 4, "rollout_fragment_length": 128, "train_batch_size": 1024,
        "sgd_minibatch_size": 256, "num_sgd_iter": 10, "lr": 1e-3, "lambda": 0.95, "kl_coeff": 0.0,
        "vf_clip_param": 10000.0, "model": {"fcnet_hiddens": [32, 32]}, "metrics_smoothing_episodes": 20,
        "env_config": {"num_agents": 2},
        "multiagent": {"policies": {"p0", "p1"},
                       "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}})
    try:
        first = trainer.train()["policy_reward_mean"]
        for _ in range(29):
            means = trainer.train()["policy_reward_mean"]
            if min(means.values()) >= 150:
                break
    finally:
        trainer.stop()
    # Each policy, on its own agent's samples only, gets from ~25 to >= 150.
    assert max(first.values()) < 60 and min(means.values()) >= 150, (first, means)


# --- PettingZoo ------------------------------------------------------------------------------------
def test_pettingzoo_parallel_env_trains_two_iterations_with_ppo():
    pytest.importorskip("pettingzoo")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    rps = pytest.importorskip("pettingzoo.classic.rps_v2")
    from rlfleet.env.pettingzoo import ParallelPettingZooEnv

    register_env("rps_parallel", lambda ctx: ParallelPettingZooEnv(rps.parallel_env(max_cycles=10)))
    trainer = PPOTrainer(env="rps_parallel", config={
        "seed": 0, "rollout_fragment_length": 20, "train_batch_size": 40, "sgd_minibatch_size": 20,
        "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]},
        "multiagent": {"policies": {"player_0", "player_1"},
                       "policy_mapping_fn": lambda aid, episode, worker, **kw: aid}})
    for _ in range(2):
        result = trainer.train()
    assert result["training_iteration"] == 2 and result["episodes_total"] >= 4
    assert set(result["info"]["learner"]) == {"player_0", "player_1"}
    # Zero-sum: the two players' returns cancel.
    assert result["policy_reward_mean"]["player_0"] == pytest.approx(-result["policy_reward_mean"]["player_1"])
    trainer.stop()


def test_pettingzoo_aec_env_turn_based():
    pytest.importorskip("pettingzoo")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    ttt = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    from rlfleet.env.pettingzoo import PettingZooEnv

    register_env("tictactoe_aec", lambda ctx: ttt.env())  # the raw AEC env: the worker wraps it
    trainer = PGTrainer(env="tictactoe_aec", config=pg_config(
        rollout_fragment_length=30, train_batch_size=30, multiagent={
            "policies": {"player_1", "player_2"},
            "policy_mapping_fn": lambda aid, episode, worker, **kw: aid}))
    assert isinstance(trainer.workers.local_worker().env.envs[0], PettingZooEnv)
    batch = trainer.workers.local_worker().sample()
    # Turns alternate: the two players' step counts differ by at most one per episode.
    counts = {pid: b.count for pid, b in batch.policy_batches.items()}
    episodes = len(set(batch.policy_batches["player_1"][SB.EPS_ID]))
    assert abs(counts["player_1"] - counts["player_2"]) <= episodes + 1
    result = trainer.train()
    assert set(result["policy_reward_mean"]) == {"player_1", "player_2"}
    trainer.stop()


def test_make_multi_agent_episode_flags():
    env = make_multi_agent("CartPole-v1")({"num_agents": 2})
    obs, _ = env.reset(seed=0)
    assert set(obs) == {0, 1}
    done = set()
    while True:
        obs, rew, term, trunc, _ = env.step({i: 0 for i in obs if i not in done})
        done |= {i for i in (0, 1) if term.get(i) or trunc.get(i)}
        if term[ALL] or trunc[ALL]:
            break
        assert not term[ALL] and done != {0, 1}
    assert done == {0, 1} and term[ALL]


def test_lockstep_timeslices_keep_an_env_step_together():
    w = worker_for(JoinLeaveEnv, batch_mode="complete_episodes",
                   multiagent={**TWO_POLICIES, "replay_mode": "lockstep"})
    batch = w.sample()
    slices = batch.timeslices(2)
    assert [s.env_steps() for s in slices] == [2, 2, 2]
    assert [s.agent_steps() for s in slices] == [2, 4, 2]  # b acts in steps t=2, 3
    np.testing.assert_array_equal(slices[1].policy_batches["pb"][SB.T], [2, 3])
    np.testing.assert_array_equal(slices[1].policy_batches["pa"][SB.T], [2, 3])


def test_callbacks_see_policies_and_per_agent_accessors():
    from rlfleet.callbacks import DefaultCallbacks

    log = []

    class Recorder(DefaultCallbacks):
        def on_episode_start(self, *, worker, base_env, policies, episode, env_index=None, **kw):
            log.append(("start", sorted(policies), episode.get_agents()))

        def on_episode_step(self, *, worker, base_env, episode, env_index=None, **kw):
            if episode.length == 3:
                log.append(("step", episode.last_raw_obs_for("b").tolist(), episode.last_reward_for("b"),
                            episode.policy_for("b"), episode.last_action_for("b") is not None))

        def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kw):
            episode.custom_metrics["b_reward"] = episode.agent_rewards[("b", "pb")]
            log.append(("end", episode.length, episode.last_done_for("b"), episode.last_terminated_for("a")))

    w = worker_for(JoinLeaveEnv, batch_mode="complete_episodes", callbacks=Recorder, multiagent=TWO_POLICIES)
    w.sample()
    assert log[0] == ("start", ["pa", "pb"], ["a"])
    assert ("step", [3.0, 1.0], 10.0, "pb", True) in log
    assert ("end", 6, True, True) in log
    assert w.get_metrics()[0].custom_metrics == {"b_reward": 20.0}


def test_horizon_ends_every_agent_as_the_reference_does():
    w = worker_for(JoinLeaveEnv, horizon=3, batch_mode="complete_episodes", multiagent=TWO_POLICIES)
    batch = w.sample()
    a = batch.policy_batches["pa"]
    # Two horizon-cut episodes of 3 steps: last rows done, and terminal (the reference's done=True).
    np.testing.assert_array_equal(a[SB.DONES], [False, False, True] * 2)
    np.testing.assert_array_equal(a[SB.TERMINATEDS], a[SB.DONES])
    assert not a[SB.TRUNCATEDS].any()
    bootstrapping = worker_for(JoinLeaveEnv, horizon=3, no_done_at_end=True, batch_mode="complete_episodes",
                               multiagent=TWO_POLICIES).sample().policy_batches["pa"]
    assert not bootstrapping[SB.TERMINATEDS].any() and bootstrapping[SB.TRUNCATEDS].sum() == 2
    assert batch.env_steps() == 6


# --- off-policy multi-agent (replay_mode "independent": one replay buffer per policy) ------------
TWO_CARTPOLE_POLICIES = {"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, *args, **kwargs: f"p{aid}"}


def _flat_weights(policy):
    return {k: np.array(v, copy=True) for k, v in policy.get_weights().items()}


@pytest.mark.slow
def test_dqn_trains_two_policies_on_two_agent_cartpole(tmp_path):
    # tuned_examples/dqn/cartpole-dqn.yaml, one policy per agent. Measured: p0 202, p1 168 (mean
    # of the last 20 episodes) after 7000 env steps, ~12 s here.
    config = {**load_tuned_example("dqn/cartpole-dqn.yaml").config, "log_sys_usage": False,
              "env_config": {"num_agents": 2}, "multiagent": TWO_CARTPOLE_POLICIES}
    try:
        trainer = DQNTrainer(env=MultiAgentCartPole, logdir=str(tmp_path), config=config)
        start = {pid: _flat_weights(trainer.get_policy(pid)) for pid in ("p0", "p1")}
        assert trainer.replay_buffers == {}  # one per trained policy, made when it first stores samples
        first = None
        while trainer.counters["num_env_steps_sampled"] < 20000:
            result = trainer.train()
            first = first or result["policy_reward_mean"]
            if min(result["policy_reward_mean"].values()) >= 150:
                break
        for pid in ("p0", "p1"):
            after = trainer.get_policy(pid).get_weights()
            assert any(not np.array_equal(start[pid][k], after[k]) for k in after), pid
            assert result["policy_reward_mean"][pid] >= 150, result["policy_reward_mean"]
            assert result["info"]["learner"][pid]["learner_stats"]
        # One buffer per policy, each holding only its agent's transitions.
        assert len(trainer.replay_buffers["p0"]) + len(trainer.replay_buffers["p1"]) == (
            trainer.counters["num_agent_steps_sampled"])
        assert trainer.counters["num_agent_steps_trained"] == 2 * trainer.counters["num_env_steps_trained"]
    finally:
        trainer.stop()


def test_dqn_policies_to_train_leaves_the_frozen_policy_bit_identical(tmp_path):
    trainer = DQNTrainer(env=MultiAgentCartPole, logdir=str(tmp_path), config=dict(
        seed=0, model={"fcnet_hiddens": [16]}, hiddens=[16], learning_starts=0, rollout_fragment_length=20,
        train_batch_size=16, target_network_update_freq=20, log_sys_usage=False, env_config={"num_agents": 2},
        multiagent=dict(TWO_CARTPOLE_POLICIES, policies_to_train=["p0"])))
    start = {pid: _flat_weights(trainer.get_policy(pid)) for pid in ("p0", "p1")}
    for _ in range(4):
        result = trainer.train()
    frozen = trainer.get_policy("p1").get_weights()
    assert all(np.array_equal(start["p1"][k], frozen[k]) for k in frozen)
    learned = trainer.get_policy("p0").get_weights()
    assert any(not np.array_equal(start["p0"][k], learned[k]) for k in learned)
    assert "p1" not in trainer.replay_buffers and len(trainer.replay_buffers["p0"]) > 0
    assert set(result["info"]["learner"]) == {"p0"}
    assert result["num_target_updates"] >= 1
    trainer.stop()


def test_dqn_multi_agent_checkpoint_stores_every_policy_buffer(tmp_path):
    config = dict(seed=0, model={"fcnet_hiddens": [16]}, hiddens=[16], learning_starts=0, rollout_fragment_length=20,
                  train_batch_size=16, store_buffer_in_checkpoints=True, log_sys_usage=False,
                  env_config={"num_agents": 2}, multiagent=TWO_CARTPOLE_POLICIES)
    trainer = DQNTrainer(env=MultiAgentCartPole, logdir=str(tmp_path / "a"), config=config)
    for _ in range(3):
        trainer.train()
    path = trainer.save(str(tmp_path / "ck"))
    assert os.path.isfile(os.path.join(path, "replay_buffers", "p0.safetensors"))
    restored = DQNTrainer(env=MultiAgentCartPole, logdir=str(tmp_path / "b"), config=config)
    restored.restore(path)
    for pid in ("p0", "p1"):
        a, b = trainer.replay_buffers[pid], restored.replay_buffers[pid]
        assert len(a) == len(b) > 0
        np.testing.assert_array_equal(a.priorities(), b.priorities())
    trainer.stop()
    restored.stop()


def test_sac_trains_two_policies_on_two_agent_pendulum(tmp_path):
    small = {"fcnet_hiddens": [16]}
    trainer = SACTrainer(env=make_multi_agent("Pendulum-v1"), logdir=str(tmp_path), config=dict(
        seed=0, Q_model=small, policy_model=small, learning_starts=100, train_batch_size=32,
        rollout_fragment_length=50, timesteps_per_iteration=100, min_iter_time_s=0, log_sys_usage=False,
        env_config={"num_agents": 2},
        multiagent={"policies": {"s0", "s1"}, "policy_mapping_fn": lambda aid, *args, **kwargs: f"s{aid}"}))
    start = {pid: _flat_weights(trainer.get_policy(pid)) for pid in ("s0", "s1")}
    for _ in range(3):
        result = trainer.train()
    assert result["timesteps_total"] >= 300
    for pid in ("s0", "s1"):
        stats = result["info"]["learner"][pid]["learner_stats"]
        assert stats and all(np.isfinite(v) for v in stats.values() if np.isscalar(v)), stats
        after = trainer.get_policy(pid).get_weights()
        assert any(not np.array_equal(start[pid][k], after[k]) for k in after), pid
    trainer.stop()


# --- a seeded run repeats from one process to the next ------------------------------------
_SAMPLE_AND_DIGEST = """
import hashlib
import numpy as np
from tests.multi_agent_helpers import StaggeredEnv, worker_for
w = worker_for(StaggeredEnv, batch_mode="complete_episodes", rollout_fragment_length=20)
batch = w.sample().policy_batches["default_policy"]
print(hashlib.sha256(np.ascontiguousarray(batch["obs"]).tobytes()
                     + np.ascontiguousarray(batch["agent_index"]).tobytes()).hexdigest())
"""


def test_seeded_multi_agent_batches_repeat_under_any_hash_seed():
    # String agent ids in a set iterate in an order that changes with PYTHONHASHSEED: a sampler
    # that ordered rows by one gave each process its own batches (and its own training run).
    import subprocess
    import sys

    root = REPO_ROOT
    digests = set()
    for hash_seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": os.pathsep.join([str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")])}
        out = subprocess.run([sys.executable, "-c", _SAMPLE_AND_DIGEST], cwd=root, env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        digests.add(out.stdout.strip().splitlines()[-1])
    assert len(digests) == 1, digests
