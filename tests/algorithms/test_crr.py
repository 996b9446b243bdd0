"""CRR: its advantage weights against NumPy, a learning signal on continuous data of mixed
quality (it acts as the good half of the data, where cloning would average), and Discrete CRR
learning CartPole from a Minari dataset."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.crr import CRRTrainer
from rlfleet.algorithms.crr.crr_policy import advantage_weights
from rlfleet.policy.sample_batch import SampleBatch
from tests.offline_datasets import TargetActionEnv, minari_cartpole_source, write_target_action_dataset

SB = SampleBatch


def test_advantage_weights_match_numpy():
    adv = np.array([-3.0, -0.1, 0.0, 0.2, 1.5, 40.0])
    got_bin = advantage_weights(torch.as_tensor(adv), "bin", 1.0, 20.0).numpy()
    np.testing.assert_array_equal(got_bin, (adv > 0).astype(float))
    got_exp = advantage_weights(torch.as_tensor(adv), "exp", 0.5, 20.0).numpy()
    np.testing.assert_allclose(got_exp, np.minimum(np.exp(adv / 0.5), 20.0))
    assert got_exp[-1] == 20.0  # the clip is exercised


@pytest.mark.parametrize("weight_type", ["bin", "exp"])
def test_crr_picks_the_good_logged_actions(weight_type, tmp_path):
    # Half the logged actions are the best one, half random: behaviour cloning's mean action
    # is off by |target| / 2 (~0.19 on average); CRR's weights keep the good half. Near-default
    # settings (small nets for speed), on data no tuned example uses.
    path = str(tmp_path / "data")
    write_target_action_dataset(path, rows=2000, seed=0)
    trainer = CRRTrainer(env=TargetActionEnv, logdir=str(tmp_path / "run"), config={
        "input": path, "seed": 0, "weight_type": weight_type, "learning_starts": 2000, "buffer_size": 2000,
        "timesteps_per_iteration": 200, "actor_hiddens": [32, 32], "critic_hiddens": [32, 32],
        "input_evaluation": [], "log_sys_usage": False})
    try:
        policy = trainer.get_policy()
        while policy.num_grad_updates < 700:
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"critic_loss", "actor_loss", "mean_weight", "positive_advantage_fraction"} <= set(stats)
        obs = np.random.default_rng(9).uniform(-1, 1, (500, 2)).astype(np.float32)
        actions, _, _ = policy.compute_actions(obs, explore=False)
        target = TargetActionEnv.target(obs)
        error, cloning_error = np.abs(actions - target).mean(), np.abs(target / 2).mean()
        # Measured (seed 0): 0.016 (bin) and 0.05 (exp) after 500-700 updates.
        assert error < 0.1 and error < cloning_error / 2, (error, cloning_error)
    finally:
        trainer.stop()


@pytest.mark.slow
def test_discrete_crr_learns_cartpole_from_a_minari_dataset(tmp_path, monkeypatch):
    source, (expert_return, random_return) = minari_cartpole_source(tmp_path, monkeypatch, seed=0)
    assert expert_return > 150 and random_return < 40
    trainer = CRRTrainer(env="CartPole-v1", logdir=str(tmp_path / "run"), config={
        # 'exp' weights: with 'bin' a critic that cannot yet tell CartPole's two actions apart
        # (every reward is 1) picks one of them everywhere for a while (~2-3k updates, measured).
        "input": source, "seed": 0, "weight_type": "exp", "learning_starts": 500, "timesteps_per_iteration": 500,
        "actor_hiddens": [32, 32], "critic_hiddens": [32, 32], "actor_lr": 1e-3, "critic_lr": 1e-3,
        "evaluation_interval": 4, "evaluation_num_episodes": 5, "input_evaluation": [], "log_sys_usage": False})
    try:
        for _ in range(4):
            result = trainer.train()
        assert trainer.get_policy().num_grad_updates >= 1500
        assert result["evaluation"]["episode_reward_mean"] >= 100, result["evaluation"]["episode_reward_mean"]
    finally:
        trainer.stop()
