"""DD-PPO (algorithms/ddppo): remote workers that sample and learn, gradients all-reduced
with torch.distributed (gloo, loopback). Learning to 150 on CartPole is the tuned example
`tuned_examples/ddppo/cartpole-ddppo.yaml` (run by tests/tuned_examples/test_learning.py)."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.algorithms.ddppo import DEFAULT_CONFIG, DDPPOTrainer
from rlfleet.algorithms.ddppo.ddppo_policy import DDPPOTorchPolicy


def _weights_of_all_workers(trainer):
    return trainer.workers.foreach_worker(lambda w: w.get_weights()["default_policy"])


def test_workers_learn_in_lockstep_with_identical_weights(ray_session, tmp_path):
    # Near-default settings (reference defaults: 5 envs x 100 steps per worker, minibatches
    # of 50, 10 passes), a short run, observation filter on, seed of no tuned example.
    config = {"seed": 11, "num_workers": 2, "num_sgd_iter": 2, "log_sys_usage": False,
              "observation_filter": "MeanStdFilter", "model": {"fcnet_hiddens": [32, 32]},
              "extra_python_environs_for_worker": {"OMP_NUM_THREADS": "1"}}
    trainer = DDPPOTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path))
    try:
        assert trainer.config["train_batch_size"] == 500  # derived: 100 steps x 5 envs per worker
        start = _weights_of_all_workers(trainer)
        for k in start[1]:  # one starting point: the trainer's weights
            assert np.array_equal(start[0][k], start[1][k]) and np.array_equal(start[1][k], start[2][k])
        for it in range(2):
            result = trainer.train()
            weights = _weights_of_all_workers(trainer)
            for k in weights[1]:
                assert np.array_equal(weights[1][k], weights[2][k]), (it, k)
                # keep_local_weights_in_sync: the trainer's own worker holds them too.
                assert np.array_equal(weights[0][k], weights[1][k]), (it, k)
            assert result["timesteps_total"] == 1000 * (it + 1)
            assert result["info"]["num_env_steps_trained"] == 1000 * (it + 1)
            stats = result["info"]["learner"]["default_policy"]["learner_stats"]
            assert np.isfinite(stats["total_loss"]) and stats["kl"] >= 0
        assert any(not np.array_equal(start[1][k], weights[1][k]) for k in weights[1])
        assert result["episodes_total"] > 0 and np.isfinite(result["episode_reward_mean"])
        # The all-reduce ran: each worker learned on its own batch, yet the weights agree.
        ranks = trainer.workers.foreach_worker(
            lambda w: __import__("torch.distributed").distributed.get_rank()
            if __import__("torch.distributed").distributed.is_initialized() else None)
        assert ranks == [None, 0, 1]
        action = trainer.compute_single_action(np.zeros(4, np.float32), explore=False)
        assert action in (0, 1)
    finally:
        trainer.stop()


def test_defaults_are_the_references():
    assert DEFAULT_CONFIG["rollout_fragment_length"] == 100
    assert DEFAULT_CONFIG["num_envs_per_worker"] == 5
    assert DEFAULT_CONFIG["sgd_minibatch_size"] == 50
    assert DEFAULT_CONFIG["num_sgd_iter"] == 10
    assert DEFAULT_CONFIG["kl_coeff"] == 0.0 and DEFAULT_CONFIG["kl_target"] == 0.0
    assert DEFAULT_CONFIG["keep_local_weights_in_sync"] is True
    assert DEFAULT_CONFIG["batch_mode"] == "truncate_episodes"
    assert DEFAULT_CONFIG["num_gpus"] == 0
    assert DDPPOTrainer._policy_class is DDPPOTorchPolicy


@pytest.mark.parametrize("config,key", [
    ({"num_workers": 0}, "'num_workers': 0"),
    ({"train_batch_size": 4000}, "'train_batch_size': 4000"),
    ({"kl_coeff": 0.2}, "'kl_coeff': 0.2"),
    ({"kl_target": 0.01}, "'kl_target': 0.01"),
    ({"batch_mode": "complete_episodes"}, "'batch_mode': 'complete_episodes'"),
    ({"num_gpus": 1, "_fake_gpus": True}, "'num_gpus': 1"),
    ({"sgd_minibatch_size": 600}, "'sgd_minibatch_size': 600"),
    ({"recreate_failed_workers": True}, "'recreate_failed_workers': True"),
    ({"model": {"use_lstm": True}}, "'model.use_lstm': True"),
    ({"torch_distributed_backend": "mpi"}, "'torch_distributed_backend'"),
])
def test_config_errors_name_the_key(config, key, tmp_path):
    with pytest.raises(ValueError) as info:
        DDPPOTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path))
    assert key in str(info.value)


def test_train_batch_size_follows_the_fragment():
    cfg = DDPPOTrainer.merge_trainer_configs(DEFAULT_CONFIG, {"rollout_fragment_length": 64,
                                                              "num_envs_per_worker": 3})
    assert cfg["train_batch_size"] == 192
    # Given explicitly and matching: accepted as is.
    cfg = DDPPOTrainer.merge_trainer_configs(DEFAULT_CONFIG, {"train_batch_size": 500})
    assert cfg["train_batch_size"] == 500
