"""Ape-X DQN: per-worker epsilons, replay shards (in-process and as Ray actors), worker-side
priorities, the learner thread's priority updates and target refreshes.

Learning on CartPole runs from tuned_examples/apex (tests/tuned_examples/test_learning.py).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from rlfleet.algorithms.apex import ApexTrainer
from rlfleet.algorithms.apex.replay_shard import ReplayShard, td_errors, worker_side_transitions
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.exploration.epsilon_greedy import PerWorkerEpsilonGreedy, per_worker_epsilon
from rlfleet.registry import get_trainer_class

SMALL = {"min_iter_time_s": 0, "seed": 3, "timesteps_per_iteration": 200, "learning_starts": 200,
         "buffer_size": 10000, "train_batch_size": 32, "rollout_fragment_length": 20,
         "target_network_update_freq": 500, "model": {"fcnet_hiddens": [16]}, "hiddens": [16]}


def test_per_worker_epsilons_follow_the_reference_formula():
    import gymnasium as gym

    n = 4
    for i in range(1, n + 1):
        assert per_worker_epsilon(i, n) == pytest.approx(0.4 ** (1 + 7 * i / (n - 1)))
    assert per_worker_epsilon(0, n) == 0.0
    assert per_worker_epsilon(1, 1) == pytest.approx(0.4 ** 8)  # one worker: n - 1 taken as 1
    space = gym.spaces.Discrete(2)
    assert PerWorkerEpsilonGreedy(space, policy_config={"worker_index": 2, "num_workers": 4},
                                  epsilon_timesteps=100).epsilon_schedule(10 ** 6) == pytest.approx(0.4 ** (1 + 14 / 3))
    # No remote workers: the local worker explores with the configured schedule.
    local = PerWorkerEpsilonGreedy(space, policy_config={"worker_index": 0, "num_workers": 0},
                                   initial_epsilon=1.0, final_epsilon=0.1, epsilon_timesteps=100)
    assert local.epsilon_schedule(0) == 1.0 and local.epsilon_schedule(100) == pytest.approx(0.1)


def test_apex_is_registered_with_the_reference_defaults():
    assert get_trainer_class("APEX") is ApexTrainer
    cfg = ApexTrainer.get_default_config() if hasattr(ApexTrainer, "get_default_config") else ApexTrainer._default_config
    assert cfg["num_replay_buffer_shards"] == 4 and cfg["max_weight_sync_delay"] == 400
    assert cfg["n_step"] == 3 and cfg["worker_side_prioritization"] is True
    assert cfg["exploration_config"]["type"] == "PerWorkerEpsilonGreedy"


def test_bad_values_name_the_key():
    with pytest.raises(ValueError, match="num_replay_buffer_shards"):
        ApexTrainer(env="CartPole-v1", config=dict(SMALL, num_workers=0, num_replay_buffer_shards=0))
    with pytest.raises(ValueError, match="store_buffer_in_checkpoints"):
        ApexTrainer(env="CartPole-v1", config=dict(SMALL, num_workers=0, store_buffer_in_checkpoints=True))


def test_worker_side_priorities_are_the_policys_td_errors():
    trainer = ApexTrainer(env="CartPole-v1", config=dict(SMALL, num_workers=0))
    try:
        local = trainer.workers.local_worker()
        items = worker_side_transitions(local, local.sample())
        transitions, priorities = items[DEFAULT_POLICY_ID]
        policy = trainer.get_policy()
        expected = np.abs(td_errors(policy, transitions)) + trainer.config["prioritized_replay_eps"]
        np.testing.assert_allclose(priorities, expected, rtol=1e-6)
        assert transitions.count == 20 and np.ptp(priorities) > 0
        # A shard stores them with exactly those priorities (^alpha).
        shard = ReplayShard(trainer.config, 0, 100, 10)
        shard.add(items)
        np.testing.assert_allclose(shard.priorities(DEFAULT_POLICY_ID), expected ** trainer.config[
            "prioritized_replay_alpha"], rtol=1e-5)
    finally:
        trainer.stop()


@pytest.mark.parametrize("env", ["Acrobot-v1", "CartPole-v1"])
def test_in_process_shards_learn_update_priorities_and_targets(env):
    # Near-default settings (the reference's, only smaller), num_workers 0: no Ray.
    trainer = ApexTrainer(env=env, config=dict(SMALL, num_workers=0, training_intensity=32))
    sent = []  # the (batch indexes, priorities) the learner sent back, in order

    def record(updates, update):
        sent.append(updates[DEFAULT_POLICY_ID])
        update(updates)
    for shard in trainer.shards:  # plain objects in this process
        shard.update_priorities = functools.partial(record, update=shard.update_priorities)
    try:
        before = trainer.get_policy().get_weights()
        for _ in range(3):
            result = trainer.train()
        info = result["info"]
        # The mean |TD error| reported is the last learned batch's, whose new priorities
        # (|TD error| + eps) went back to its shard; an untrained Q-net's is not zero.
        _, priorities = sent[-1]
        mean_td = info["learner"][DEFAULT_POLICY_ID]["learner_stats"]["mean_td_error"]
        assert mean_td > 0
        assert mean_td == pytest.approx(float(np.mean(priorities - trainer.config["prioritized_replay_eps"])), rel=1e-4)
        assert info["num_target_updates"] >= 1 and info["num_env_steps_trained"] > 0
        shards = [info[f"replay_shard_{i}"] for i in range(4)]
        assert sum(s[DEFAULT_POLICY_ID]["num_added"] for s in shards) == result["timesteps_total"]
        assert all(s["num_priority_updates"] > 0 for s in shards)
        after = trainer.get_policy().get_weights()
        assert any(not np.allclose(before[k], after[k]) for k in before)
    finally:
        trainer.stop()


def test_remote_workers_add_to_ray_shards(ray_session, tmp_path):
    cfg = dict(SMALL, num_workers=2, num_replay_buffer_shards=2, num_cpus_per_worker=0.5,
               max_weight_sync_delay=100, timesteps_per_iteration=400)
    trainer = ApexTrainer(env="CartPole-v1", config=cfg)
    try:
        assert not any(isinstance(s, ReplayShard) for s in trainer.shards)  # Ray actor handles
        # Per-worker epsilons: worker i of n gets 0.4 ** (1 + 7 i / (n - 1)); the local one 0.
        eps = trainer.workers.foreach_worker_with_index(
            lambda w, i: w.get_policy().exploration.epsilon_schedule(10 ** 6))
        assert eps == pytest.approx([0.0, 0.4 ** 8, 0.4 ** 15])
        for _ in range(8):
            result = trainer.train()
            if result["info"]["num_target_updates"] > 0 and result["info"]["num_weight_syncs"] > 2:
                break
        info = result["info"]
        assert result["timesteps_total"] >= 400 and result["num_healthy_workers"] == 2
        assert info["num_env_steps_trained"] > 0 and info["num_weight_syncs"] > 0
        assert info["num_target_updates"] > 0
        added = sum(info[f"replay_shard_{i}"][DEFAULT_POLICY_ID]["num_added"] for i in range(2))
        assert added > 0 and all(info[f"replay_shard_{i}"]["num_priority_updates"] > 0 for i in range(2))
        prios = trainer.shard_priorities(0)
        assert len(prios) > 0 and np.ptp(prios) > 0  # priorities from TD errors, not all the max
        # The workers act with weights pushed from the learner.
        w_local = trainer.get_policy().get_weights()
        w_remote = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())[1]
        assert set(w_local) == set(w_remote)
        path = trainer.save(str(tmp_path))
    finally:
        trainer.stop()
    restored = ApexTrainer(env="CartPole-v1", config=dict(cfg, num_workers=0))
    try:
        restored.restore(path)
        for k, v in w_local.items():
            assert np.asarray(restored.get_policy().get_weights()[k]).shape == np.asarray(v).shape
    finally:
        restored.stop()


# --- Ape-X DDPG -----------------------------------------------------------------------------
DDPG_SMALL = {"min_iter_time_s": 0, "seed": 2, "timesteps_per_iteration": 200, "learning_starts": 200,
              "buffer_size": 10000, "train_batch_size": 32, "rollout_fragment_length": 10,
              "actor_hiddens": [16], "critic_hiddens": [16], "target_network_update_freq": 0}


def test_apex_ddpg_is_registered_with_the_reference_defaults():
    from rlfleet.algorithms.apex import ApexDDPGTrainer
    from rlfleet.algorithms.apex.exploration import PerWorkerOrnsteinUhlenbeckNoise

    assert get_trainer_class("APEX_DDPG") is ApexDDPGTrainer
    cfg = ApexDDPGTrainer._default_config
    assert cfg["num_replay_buffer_shards"] == 4 and cfg["max_weight_sync_delay"] == 400 and cfg["n_step"] == 3
    assert cfg["worker_side_prioritization"] is True and cfg["num_workers"] == 32
    assert cfg["target_network_update_freq"] == 500000 and cfg["train_batch_size"] == 512
    assert cfg["exploration_config"]["type"].endswith("PerWorkerOrnsteinUhlenbeckNoise")
    assert "actor_hiddens" in cfg and "num_atoms" not in cfg  # DDPG's keys, not DQN's
    import gymnasium as gym

    box = gym.spaces.Box(-2.0, 2.0, (1,))
    noise = PerWorkerOrnsteinUhlenbeckNoise(box, policy_config={"worker_index": 3, "num_workers": 4})
    assert noise.scale_schedule(10 ** 6) == pytest.approx(0.4 ** (1 + 7))
    assert PerWorkerOrnsteinUhlenbeckNoise(box, policy_config={"worker_index": 0, "num_workers": 4}
                                           ).scale_schedule(10 ** 6) == 0.0
    with pytest.raises(ValueError, match="training_intensity"):
        ApexDDPGTrainer(env="Pendulum-v1", config=dict(DDPG_SMALL, num_workers=2, training_intensity=4))


def test_apex_ddpg_on_pendulum_with_remote_workers_and_shards_and_checkpoint(ray_session, tmp_path):
    from rlfleet.algorithms.apex import ApexDDPGTrainer

    cfg = dict(DDPG_SMALL, num_workers=2, num_replay_buffer_shards=2, num_cpus_per_worker=0.5,
               max_weight_sync_delay=100, timesteps_per_iteration=400)
    trainer = ApexDDPGTrainer(env="Pendulum-v1", config=cfg)
    try:
        assert not any(isinstance(s, ReplayShard) for s in trainer.shards)  # Ray actors
        scales = trainer.workers.foreach_worker_with_index(
            lambda w, i: w.get_policy().exploration.scale_schedule(10 ** 6))
        assert scales == pytest.approx([0.0, 0.4 ** 8, 0.4 ** 15])
        before = trainer.get_policy().get_weights()
        for _ in range(8):
            result = trainer.train()
            if result["info"]["num_env_steps_trained"] > 0 and result["info"]["num_weight_syncs"] > 2:
                break
        info = result["info"]
        assert result["num_healthy_workers"] == 2 and info["num_env_steps_trained"] > 0
        assert info["num_weight_syncs"] > 0 and info["num_target_updates"] > 0
        assert all(info[f"replay_shard_{i}"]["num_priority_updates"] > 0 for i in range(2))
        prios = trainer.shard_priorities(1)
        assert len(prios) > 0 and np.ptp(prios) > 0  # worker-side priorities: |TD error|, not all the max
        assert "critic_loss" in info["learner"][DEFAULT_POLICY_ID]["learner_stats"]
        with trainer.learner_paused():
            weights = trainer.get_policy().get_weights()
            path = trainer.save(str(tmp_path))
        assert any(not np.allclose(before[k], weights[k]) for k in before)
    finally:
        trainer.stop()
    restored = ApexDDPGTrainer.from_checkpoint(path, config_overrides={"num_workers": 0})
    try:
        for k, v in weights.items():
            np.testing.assert_array_equal(restored.get_policy().get_weights()[k], v)
        obs = np.array([1.0, 0.0, 0.1], np.float32)
        assert restored.compute_single_action(obs, explore=False).shape == (1,)
        restored.train()  # goes on learning with in-process shards
    finally:
        restored.stop()
