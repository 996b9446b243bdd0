"""RE3: the k-NN distances and the bonus against NumPy, the beta schedule, the bonus on the
replayed train batch only (SAC, DQN), the random first steps, checkpoints, and clear errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.config import validate_config
from rlfleet.exploration.epsilon_greedy import EpsilonGreedy
from rlfleet.exploration.re3 import RE3, RunningMeanStd, knn_distances
from rlfleet.policy.sample_batch import SampleBatch

import torch

SB = SampleBatch
PENDULUM = (gym.spaces.Box(-8.0, 8.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32))
SMALL = {"type": "RE3", "embeds_dim": 16, "k_nn": 3, "random_timesteps": 0,
         "encoder_net_config": {"fcnet_hiddens": []}}
SAC_SMALL = {"seed": 0, "learning_starts": 64, "train_batch_size": 32, "timesteps_per_iteration": 100,
             "min_iter_time_s": 0, "Q_model": {"fcnet_hiddens": [16]}, "policy_model": {"fcnet_hiddens": [16]}}


def make_policy(trainer_cls, spaces, **config):
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, config)
    validate_config(cfg)
    cfg["worker_index"] = 0
    return trainer_cls._policy_class(spaces[0], spaces[1], cfg)


def replayed(n=20, seed=0):
    rng = np.random.default_rng(seed)
    return SampleBatch({SB.OBS: rng.normal(size=(n, 3)).astype(np.float32),
                        SB.NEXT_OBS: rng.normal(size=(n, 3)).astype(np.float32),
                        SB.ACTIONS: rng.uniform(-1, 1, (n, 1)).astype(np.float32),
                        SB.REWARDS: rng.normal(size=n).astype(np.float32)})


def test_knn_distance_is_the_kth_nearest_other_row():
    x = np.random.default_rng(0).normal(size=(30, 4))
    brute = np.sort(np.linalg.norm(x[:, None] - x[None], axis=-1), axis=1)[:, 1:]  # without the row itself
    for k in (1, 5, 29, 100):  # k beyond the batch: the farthest row
        np.testing.assert_allclose(knn_distances(torch.as_tensor(x), k).numpy(), brute[:, min(k, 29) - 1],
                                   rtol=1e-6)


def test_running_std_matches_numpy_over_everything_seen():
    stats, seen = RunningMeanStd(), []
    rng = np.random.default_rng(1)
    for n in (5, 40, 7):
        x = rng.normal(3.0, 2.0, n)
        stats.update(x)
        seen.append(x)
    allx = np.concatenate(seen)
    np.testing.assert_allclose([stats.mean, stats.std], [allx.mean(), allx.std()], rtol=1e-4)


def test_bonus_on_the_train_batch_against_numpy_with_the_beta_schedule():
    policy = make_policy(SACTrainer, PENDULUM, seed=0, timesteps_per_iteration=100, exploration_config={
        **SMALL, "beta": 0.5, "beta_schedule": "linear_decay", "rho": 0.2})
    re3 = policy.exploration
    assert isinstance(re3, RE3) and policy.get_weights().keys() >= {f"exploration.{k}" for k in re3.get_weights()}
    batch = replayed()
    extrinsic = batch[SB.REWARDS].copy()
    with torch.no_grad():
        embeddings = re3.encoder({"obs": torch.as_tensor(batch[SB.OBS])}, [], None)[0].numpy().astype(np.float64)
    d = np.sort(np.linalg.norm(embeddings[:, None] - embeddings[None], axis=-1), axis=1)[:, 3]
    std = np.sqrt((1e-4 * 1.0 + d.var() * 20 + (d.mean() ** 2) * 1e-4 * 20 / (20 + 1e-4)) / (20 + 1e-4))
    policy.global_timestep = 250  # two whole iterations of 100 steps: beta x 0.8^2
    re3.on_learn_on_batch(policy, batch)
    np.testing.assert_allclose(batch[SB.REWARDS] - extrinsic, 0.5 * 0.8 ** 2 * np.log1p(d / std), rtol=1e-4)
    info = re3.get_info()
    assert info["re3_beta"] == pytest.approx(0.32) and info["intrinsic_reward_mean"] > 0
    assert info["extrinsic_reward_mean"] == pytest.approx(float(extrinsic.mean()))


def test_random_first_steps_then_the_sub_exploration():
    policy = make_policy(DQNTrainer, (PENDULUM[0], gym.spaces.Discrete(4)), seed=0, exploration_config={
        **SMALL, "random_timesteps": 100, "sub_exploration": {"type": "EpsilonGreedy", "initial_epsilon": 0.0,
                                                              "final_epsilon": 0.0}})
    assert isinstance(policy.exploration.sub_exploration, EpsilonGreedy)
    obs = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32)
    early, _, _ = policy.compute_actions(obs, explore=True, timestep=10)
    late, _, _ = policy.compute_actions(obs, explore=True, timestep=100)
    greedy, _, _ = policy.compute_actions(obs, explore=False, timestep=10)
    assert np.array_equal(late, greedy) and not np.array_equal(early, greedy)
    assert len(np.unique(early)) == 4


def test_sac_learns_with_the_bonus_and_the_replay_buffer_keeps_extrinsic_rewards(tmp_path):
    config = {**SAC_SMALL, "exploration_config": SMALL}
    trainer = SACTrainer(env="Pendulum-v1", config=config)
    restored = SACTrainer(env="Pendulum-v1", config=config)
    try:
        for _ in range(2):
            result = trainer.train()
        info = result["info"]["learner"]["default_policy"]
        assert info["learner_stats"]["intrinsic_reward_mean"] > 0 and info["fast_path"] == "numpy"
        stored = trainer.local_replay_buffer._storage[SB.REWARDS][:trainer.local_replay_buffer._size]
        assert stored.max() <= 0.0  # Pendulum pays <= 0: no bonus was written back into replay
        path = trainer.save(str(tmp_path))
        restored.restore(path)
        a, b = trainer.get_policy().exploration, restored.get_policy().exploration
        assert all(np.array_equal(v, b.get_weights()[k]) for k, v in a.get_weights().items())
        assert b.distance_stats.get_state() == a.distance_stats.get_state() and a.distance_stats.count > 1
    finally:
        trainer.stop()
        restored.stop()


def test_dqn_with_re3_trains():
    trainer = DQNTrainer(env="CartPole-v1", config={
        "seed": 0, "learning_starts": 64, "train_batch_size": 32, "timesteps_per_iteration": 100,
        "min_iter_time_s": 0, "hiddens": [16], "model": {"fcnet_hiddens": [16]},
        "exploration_config": {**SMALL, "sub_exploration": {"type": "EpsilonGreedy", "epsilon_timesteps": 200}}})
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats["intrinsic_reward_mean"] > 0 and "cur_epsilon" in stats
    finally:
        trainer.stop()


def test_clear_errors():
    with pytest.raises(ValueError, match="beta_schedule must be one of \\['constant', 'linear_decay'\\]"):
        make_policy(SACTrainer, PENDULUM, exploration_config={**SMALL, "beta_schedule": "linear"})
    with pytest.raises(ValueError, match="exploration_config.k_nn must be an int >= 1"):
        make_policy(SACTrainer, PENDULUM, exploration_config={**SMALL, "k_nn": 0})
    with pytest.raises(ValueError, match="exploration_config.rho must be in \\[0, 1\\)"):
        make_policy(SACTrainer, PENDULUM, exploration_config={**SMALL, "rho": 1.0})
    with pytest.raises(ValueError, match="encoder_net_config has unknown model keys"):
        make_policy(SACTrainer, PENDULUM, exploration_config={**SMALL, "encoder_net_config": {"hiddens": []}})
    with pytest.raises(ValueError, match="sub_exploration must be an exploration config other than RE3"):
        make_policy(SACTrainer, PENDULUM, exploration_config={**SMALL, "sub_exploration": {"type": "RE3"}})
    trainer = PPOTrainer(env="CartPole-v1", config={"seed": 0, "train_batch_size": 64, "sgd_minibatch_size": 32,
                                                    "rollout_fragment_length": 64, "exploration_config": SMALL})
    try:
        with pytest.raises(ValueError, match="'RE3' adds its bonus to replayed train batches .* use 'Curiosity'"):
            trainer.train()
    finally:
        trainer.stop()
