"""`rollout_fragment_length: "auto"` and the warning when one round of fragments is far over
`train_batch_size` (rlfleet/config/fragments.py), on real PPO / DQN trainers on CartPole."""
from __future__ import annotations

import logging

import pytest

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import validate_config
from rlfleet.config.fragments import oversized_batch_warning, resolve_auto_fragment

SMALL = {"sgd_minibatch_size": 64, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "seed": 0}


@pytest.mark.parametrize("workers, envs, batch, fragment", [(0, 1, 4000, 4000), (0, 256, 4000, 16),
                                                            (2, 3, 1000, 167), (4, 1, 10, 3)])
def test_auto_makes_one_round_of_fragments_about_the_train_batch(workers, envs, batch, fragment):
    config = {"rollout_fragment_length": "auto", "num_workers": workers, "num_envs_per_worker": envs,
              "train_batch_size": batch}
    resolve_auto_fragment(config)
    assert config["rollout_fragment_length"] == fragment
    round_steps = fragment * envs * max(workers, 1)
    assert batch <= round_steps < batch + envs * max(workers, 1)  # under one step per env over
    assert oversized_batch_warning(config) is None


def test_a_wrong_fragment_value_names_auto_as_an_option():
    with pytest.raises(ValueError, match="'rollout_fragment_length': 'atuo' is invalid; expected an int >= 1, or "
                                         "\"auto\""):
        validate_config({"rollout_fragment_length": "atuo"})


def test_ppo_with_auto_samples_its_train_batch_per_iteration(tmp_path):
    trainer = PPOTrainer(config={**SMALL, "num_envs_per_worker": 8, "train_batch_size": 400,
                                 "rollout_fragment_length": "auto"}, env="CartPole-v1", logdir=str(tmp_path))
    try:
        assert trainer.config["rollout_fragment_length"] == 50
        assert trainer.train()["timesteps_this_iter"] == 400
    finally:
        trainer.stop()


def test_a_round_over_twice_the_train_batch_is_named_in_a_warning(tmp_path, caplog):
    # As num_envs_per_worker 256 with the default fragment (200) against train_batch_size 4000,
    # scaled down: 64 envs * 200 steps = 12,800 steps per iteration against 400.
    with caplog.at_level(logging.WARNING, logger="rlfleet"):
        trainer = PPOTrainer(config={**SMALL, "num_envs_per_worker": 64, "train_batch_size": 400},
                             env="CartPole-v1", logdir=str(tmp_path / "ppo"))
        trainer.stop()
    (warning,) = [r.getMessage() for r in caplog.records if "train_batch_size" in r.getMessage()]
    assert "PPO: each training step samples at least 12,800 env steps against 'train_batch_size': 400" in warning
    assert "rollout_fragment_length 200 * num_envs_per_worker 64" in warning
    assert "'rollout_fragment_length': 'auto' (or 7)" in warning
    caplog.clear()
    # DQN's train_batch_size is the replay batch, not what an iteration samples: no warning.
    with caplog.at_level(logging.WARNING, logger="rlfleet"):
        DQNTrainer(config={"num_envs_per_worker": 64, "train_batch_size": 32, "seed": 0}, env="CartPole-v1",
                   logdir=str(tmp_path / "dqn")).stop()
    assert not [r for r in caplog.records if "train_batch_size" in r.getMessage()]


def test_remote_workers_count_in_the_round():
    config = {"rollout_fragment_length": 200, "num_workers": 4, "num_envs_per_worker": 2, "train_batch_size": 500}
    warning = oversized_batch_warning(config)
    assert warning is not None and "at least 1,600 env steps" in warning and "* 4 workers (num_workers)" in warning
    assert oversized_batch_warning({**config, "input": "/data/cartpole"}) is None  # offline input: no fragments
