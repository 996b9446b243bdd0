"""Every registered algorithm x every action space it supports: two train() calls on a tiny
env, a second or so each. They check that the pieces fit (sampling, learning, acting), not
that anything learns: that is test_learning.py's job. An unsupported pair must be refused
when the trainer is built, with a ValueError that names the space."""
from __future__ import annotations

import math
from typing import Any, Dict

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.registry import get_trainer_class, list_algorithms
from rlfleet.config import DEFAULT_POLICY_ID

S = gym.spaces

ACTION_SPACES = {
    "Discrete": S.Discrete(3),
    "Box": S.Box(-2.0, 2.0, (2,), np.float32),
    "MultiDiscrete": S.MultiDiscrete([3, 4]),
    "MultiBinary": S.MultiBinary(4),
    "Dict": S.Dict({"move": S.Discrete(3), "force": S.Box(-2.0, 2.0, (2,), np.float32)}),
    "Tuple": S.Tuple((S.Discrete(2), S.Box(-1.0, 1.0, (2,), np.float32))),
}

SUPPORTED_ACTION_SPACES = {
    "PPO": set(ACTION_SPACES),
    "DDPPO": set(ACTION_SPACES),
    "PG": set(ACTION_SPACES),
    "DQN": {"Discrete"},
    "SimpleQ": {"Discrete"},
    "SAC": {"Box", "Discrete"},
    "DDPG": {"Box"},
    "TD3": {"Box"},
    "A2C": set(ACTION_SPACES),
    "A3C": set(ACTION_SPACES),
    "IMPALA": set(ACTION_SPACES),
    "APPO": set(ACTION_SPACES),
    "APEX": {"Discrete"},
    "APEX_DDPG": {"Box"},
    "BC": set(ACTION_SPACES),
    "MARWIL": set(ACTION_SPACES),
    "CQL": {"Box"},
    "BanditLinUCB": {"Discrete"},
    "BanditLinTS": {"Discrete"},
    "ES": {"Discrete", "Box"},
    "ARS": {"Discrete", "Box"},
    "R2D2": {"Discrete"},
    "APEX_R2D2": {"Discrete"},
    "RNNSAC": {"Box", "Discrete"},
    "MADDPG": {"Discrete"},
    # A grouped env's Tuple of Discrete actions only (tests/test_qmix.py): every single-agent space is refused.
    "QMIX": set(),
}

# Tiny nets and batches, so that each case takes about a second. Off-policy trainers start
# learning after 16 steps and sample at least 32 steps per train() call.
_OFF_POLICY = {"learning_starts": 16, "train_batch_size": 16, "timesteps_per_iteration": 32, "min_iter_time_s": 0}
TINY_CONFIGS: Dict[str, Dict[str, Any]] = {
    "PPO": {"rollout_fragment_length": 16, "train_batch_size": 32, "sgd_minibatch_size": 16, "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [16]}},
    # DD-PPO learns on remote workers only: one here (a process group of one), plus an env on
    # the driver for the checks below.
    "DDPPO": {"num_workers": 1, "create_env_on_driver": True, "rollout_fragment_length": 16,
              "num_envs_per_worker": 2, "sgd_minibatch_size": 16, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}},
    "PG": {"rollout_fragment_length": 16, "train_batch_size": 32, "model": {"fcnet_hiddens": [16]}},
    "DQN": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}, "hiddens": [16]},
    "SimpleQ": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}},
    "SAC": {**_OFF_POLICY, "Q_model": {"fcnet_hiddens": [16]}, "policy_model": {"fcnet_hiddens": [16]}},
    "DDPG": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16],
             "exploration_config": {"random_timesteps": 16}},
    "TD3": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16],
            "exploration_config": {"random_timesteps": 16}},
    # min_iter_time_s 0: A2C's and A3C's defaults (10 s, 5 s) would make each case take that long.
    "A2C": {"rollout_fragment_length": 16, "train_batch_size": 32, "min_iter_time_s": 0,
            "model": {"fcnet_hiddens": [16]}},
    "A3C": {"rollout_fragment_length": 16, "min_iter_time_s": 0, "model": {"fcnet_hiddens": [16]}},
    "IMPALA": {"rollout_fragment_length": 16, "train_batch_size": 32, "min_iter_time_s": 0,
               "model": {"fcnet_hiddens": [16]}},
    "APPO": {"rollout_fragment_length": 16, "train_batch_size": 32, "min_iter_time_s": 0,
             "model": {"fcnet_hiddens": [16]}},
    "APEX": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}, "hiddens": [16], "num_replay_buffer_shards": 2},
    "APEX_DDPG": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16], "num_replay_buffer_shards": 2,
                  "exploration_config": {"random_timesteps": 16}},
    # Offline learners, fed by the env here ("sampler" input) rather than by files.
    "BC": {"input": "sampler", "train_batch_size": 32, "model": {"fcnet_hiddens": [16]}},
    "MARWIL": {"input": "sampler", "train_batch_size": 32, "model": {"fcnet_hiddens": [16]}},
    "CQL": {"input": "sampler", **_OFF_POLICY, "Q_model": {"fcnet_hiddens": [16]},
            "policy_model": {"fcnet_hiddens": [16]}, "bc_iters": 4, "num_actions": 2},
    "BanditLinUCB": {"timesteps_per_iteration": 16},
    "BanditLinTS": {"timesteps_per_iteration": 16},
    "ES": {"noise_size": 100_000, "episodes_per_batch": 4, "train_batch_size": 16, "model": {"fcnet_hiddens": [16]}},
    "ARS": {"noise_size": 100_000, "num_rollouts": 4, "rollouts_used": 2, "model": {"fcnet_hiddens": [16]}},
    "R2D2": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16], "use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4},
             "hiddens": [16]},
    "APEX_R2D2": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16], "use_lstm": True, "lstm_cell_size": 8,
                                           "max_seq_len": 4}, "hiddens": [16], "num_replay_buffer_shards": 2},
    "RNNSAC": {**_OFF_POLICY, "model": {"max_seq_len": 4}, "Q_model": {"fcnet_hiddens": [16], "lstm_cell_size": 8},
               "policy_model": {"fcnet_hiddens": [16], "lstm_cell_size": 8}},
    "MADDPG": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16], "rollout_fragment_length": 16},
    "QMIX": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}},
}

SUPPORTED = [(algo, space) for algo in sorted(SUPPORTED_ACTION_SPACES)
             for space in sorted(SUPPORTED_ACTION_SPACES[algo])]
# Algorithms that sample and learn on remote workers only (a Ray actor per case): run on one
# space (Discrete: tests/test_ddppo.py); their policy is PPO's, whose cases run on every space.
REMOTE_ONLY = {"DDPPO": {"Box"}}
PERTURBATION_SEARCH = {"ES", "ARS"}
UNSUPPORTED = [(algo, space) for algo in sorted(SUPPORTED_ACTION_SPACES)
               for space in sorted(set(ACTION_SPACES) - SUPPORTED_ACTION_SPACES[algo])]


class ActionSpaceEnv(gym.Env):
    """Box(3) observations and the action space `env_config["action_space"]`.

    Raises on an action outside its space; the reward is the first entry of the flattened
    action (so losses see a signal that depends on the action); 8-step episodes.
    """

    def __init__(self, env_config: Any) -> None:
        self.action_space = env_config["action_space"]
        self.observation_space = S.Box(-1.0, 1.0, (3,), np.float32)
        self.actions_received = 0
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise AssertionError(f"action {action!r} is outside {self.action_space}")
        self.actions_received += 1
        self._t += 1
        reward = float(S.flatten(self.action_space, action)[0])
        return self._obs(), reward, self._t >= 8, False, {}

    def _obs(self) -> np.ndarray:
        return self.np_random.uniform(-1.0, 1.0, 3).astype(np.float32)


def build(algo: str, space_name: str, logdir: str):
    config = {"seed": 0, "num_workers": 0, "log_sys_usage": False,
              "env_config": {"action_space": ACTION_SPACES[space_name]}, **TINY_CONFIGS[algo]}
    return get_trainer_class(algo)(env=ActionSpaceEnv, config=config, logdir=logdir)


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
