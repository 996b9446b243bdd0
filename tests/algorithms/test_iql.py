"""IQL: the expectile loss against NumPy, a learning signal on continuous data of mixed quality
(it acts as the good half of the data, where cloning would average; V an upper expectile), and
Discrete IQL learning CartPole from a Minari dataset."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.iql import IQLTrainer, expectile_loss
from rlfleet.policy.sample_batch import SampleBatch
from tests.offline_datasets import TargetActionEnv, dataset_rows, minari_cartpole_source, write_target_action_dataset

SB = SampleBatch


def test_expectile_loss_matches_numpy():
    u = np.array([-2.0, -0.5, 0.0, 0.3, 4.0])
    for tau in (0.5, 0.7, 0.9):
        want = np.abs(tau - (u < 0)) * u ** 2
        np.testing.assert_allclose(expectile_loss(torch.as_tensor(u), tau).numpy(), want)
    # 0.5 is half the squared error: V regresses on the mean; above 0.5 it leans to the upper tail.
    np.testing.assert_allclose(expectile_loss(torch.as_tensor(u), 0.5).numpy(), 0.5 * u ** 2)


def test_iql_picks_the_good_logged_actions(tmp_path):
    # Half the logged actions are the best one, half random: behaviour cloning's mean action
    # is off by |target| / 2 (~0.19 on average); IQL's weights keep the good half. Near-default
    # settings (small nets for speed), on data no tuned example uses.
    path = str(tmp_path / "data")
    write_target_action_dataset(path, rows=2000, seed=1)
    trainer = IQLTrainer(env=TargetActionEnv, logdir=str(tmp_path / "run"), config={
        "input": path, "seed": 1, "learning_starts": 2000, "buffer_size": 2000, "timesteps_per_iteration": 200,
        "actor_hiddens": [32, 32], "critic_hiddens": [32, 32], "input_evaluation": [], "log_sys_usage": False})
    try:
        policy = trainer.get_policy()
        while policy.num_grad_updates < 700:
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"value_loss", "critic_loss", "actor_loss", "mean_v", "mean_weight"} <= set(stats)
        obs = np.random.default_rng(9).uniform(-1, 1, (500, 2)).astype(np.float32)
        actions, _, _ = policy.compute_actions(obs, explore=False)
        target = TargetActionEnv.target(obs)
        error, cloning_error = np.abs(actions - target).mean(), np.abs(target / 2).mean()
        # Measured (seed 0): 0.02 after 500-700 updates.
        assert error < 0.1 and error < cloning_error / 2, (error, cloning_error)
        # V is an upper expectile (0.7) of Q over the logged actions: above their mean reward (about
        # -0.27: 0 for the good half, about -0.55 for the random half), below the best action's 0.
        with torch.no_grad():
            v = policy.model.state_value(torch.as_tensor(obs)).numpy()
        mean_reward = float(dataset_rows(path)[SB.REWARDS].mean())
        assert mean_reward + 0.05 < v.mean() < 0.0, (v.mean(), mean_reward)
    finally:
        trainer.stop()


@pytest.mark.slow
def test_discrete_iql_learns_cartpole_from_a_minari_dataset(tmp_path, monkeypatch):
    source, _ = minari_cartpole_source(tmp_path, monkeypatch, seed=1)
    trainer = IQLTrainer(env="CartPole-v1", logdir=str(tmp_path / "run"), config={
        "input": source, "seed": 0, "learning_starts": 500, "timesteps_per_iteration": 500,
        "actor_hiddens": [32, 32], "critic_hiddens": [32, 32], "actor_lr": 1e-3, "critic_lr": 1e-3,
        "value_lr": 1e-3, "evaluation_interval": 4, "evaluation_num_episodes": 5, "input_evaluation": [],
        "log_sys_usage": False})
    try:
        for _ in range(4):
            result = trainer.train()
        assert result["evaluation"]["episode_reward_mean"] >= 100, result["evaluation"]["episode_reward_mean"]
    finally:
        trainer.stop()
