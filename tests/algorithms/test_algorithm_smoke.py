"""Every registered algorithm x every action space it supports: two train() calls on a tiny
env, a second or so each. They check that the pieces fit (sampling, learning, acting), not
that anything learns: that is tests/tuned_examples/test_learning.py's job. An unsupported pair must be refused
when the trainer is built, with a ValueError that names the space."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.registry import list_algorithms
from rlfleet.config import DEFAULT_POLICY_ID
from tests.algorithm_cases import ACTION_SPACES, SUPPORTED_ACTION_SPACES, TINY_CONFIGS, build

SUPPORTED = [(algo, space) for algo in sorted(SUPPORTED_ACTION_SPACES)
             for space in sorted(SUPPORTED_ACTION_SPACES[algo])]
# Algorithms that sample and learn on remote workers only (a Ray actor per case): run on one
# space (Discrete: tests/algorithms/test_ddppo.py); their policy is PPO's, whose cases run on every space.
REMOTE_ONLY = {"DDPPO": {"Box"}}
PERTURBATION_SEARCH = {"ES", "ARS"}
UNSUPPORTED = [(algo, space) for algo in sorted(SUPPORTED_ACTION_SPACES)
               for space in sorted(set(ACTION_SPACES) - SUPPORTED_ACTION_SPACES[algo])]


def test_every_registered_algorithm_has_smoke_cases():
    assert sorted(SUPPORTED_ACTION_SPACES) == list_algorithms() == sorted(TINY_CONFIGS)


@pytest.mark.parametrize("algo,space_name", SUPPORTED, ids=[f"{a}-{s}" for a, s in SUPPORTED])
def test_two_iterations_learn_and_act_in_the_action_space(algo, space_name, tmp_path, request):
    if algo in REMOTE_ONLY:
        if space_name not in REMOTE_ONLY[algo]:
            pytest.skip(f"{algo} learns with PPO's policy, whose cases cover {space_name}")
        request.getfixturevalue("ray_session")
    space = ACTION_SPACES[space_name]
    trainer = build(algo, space_name, str(tmp_path))
    try:
        weights_before = trainer.get_policy().get_weights()
        first, second = trainer.train(), trainer.train()
        assert 0 < first["timesteps_total"] < second["timesteps_total"]
        assert second["training_iteration"] == 2
        # The asynchronous learners (IMPALA, APPO) learn in a thread: give them a few more.
        while second["num_env_steps_trained"] == 0 and second["training_iteration"] < 20:
            second = trainer.train()
        assert second["num_env_steps_trained"] > 0
        stats = second["info"]["learner"][DEFAULT_POLICY_ID]["learner_stats"]
        assert stats, f"{algo} reported no learner stats"
        not_finite = {k: v for k, v in stats.items() if not (np.isscalar(v) and math.isfinite(v))}
        assert not not_finite, f"{algo} learner stats that are not finite numbers: {not_finite}"
        weights_after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(weights_before[k], weights_after[k]) for k in weights_after), (
            f"{algo} trained on {second['num_env_steps_trained']} steps without changing a weight")

        env = trainer.workers.local_worker().env.envs[0]
        # Every action was checked against the space (by the env of the worker that sampled;
        # ES and ARS sample with their perturbation workers).
        if algo in PERTURBATION_SEARCH:
            assert sum(trainer.pool.foreach_env(lambda e: e.actions_received)) > 0
        else:
            assert sum(trainer.workers.foreach_worker(lambda w: w.env.envs[0].actions_received)) > 0
        obs = env.observation_space.sample()
        for explore in (True, False):
            action = trainer.compute_single_action(obs, explore=explore)
            assert space.contains(action), f"{algo} (explore={explore}) acted {action!r}, outside {space}"
    finally:
        trainer.stop()


@pytest.mark.parametrize("algo,space_name", UNSUPPORTED, ids=[f"{a}-{s}" for a, s in UNSUPPORTED])
def test_an_unsupported_action_space_is_refused_when_the_trainer_is_built(algo, space_name, tmp_path):
    with pytest.raises(ValueError, match=f"got {space_name}"):
        build(algo, space_name, str(tmp_path)).stop()


def test_ppo_on_pendulum_counts_time_limited_episodes(tmp_path):
    # A real Box env with a time limit (200 steps), on two envs per worker: the episode
    # counters and lengths must come out exact.
    trainer = PPOTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={
        "seed": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 100, "train_batch_size": 400,
        "sgd_minibatch_size": 100, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [32, 32]}})
    try:
        for i in (1, 2):
            result = trainer.train()
            assert result["training_iteration"] == i and result["timesteps_total"] == 400 * i
        # 800 steps over 2 envs: 4 episodes of 200 steps.
        assert result["episodes_total"] == 4 and result["episode_len_mean"] == 200
        assert np.isfinite(result["episode_reward_mean"])
        action = trainer.compute_single_action(np.array([1.0, 0.0, 0.0], np.float32), explore=False)
        assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0
    finally:
        trainer.stop()
