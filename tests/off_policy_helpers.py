"""Off-policy cases shared by the algorithm and checkpoint tests: a tiny DQN config, one small
smoke config per off-policy algorithm, and a save / restore round trip that must resume bit
for bit (replay buffer included)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

TINY_DQN = dict(seed=0, model={"fcnet_hiddens": [16]}, hiddens=[16], log_sys_usage=False, min_iter_time_s=0,
                timesteps_per_iteration=0)

# One small config per off-policy algorithm (two train() calls of each in seconds).
SMOKE = [
    ("DQN", "CartPole-v1", dict(TINY_DQN, learning_starts=64, n_step=3, num_atoms=11, noisy=True,
                                timesteps_per_iteration=200)),
    ("SimpleQ", "CartPole-v1", dict(TINY_DQN, learning_starts=64, timesteps_per_iteration=200)),
    ("SAC", "Pendulum-v1", dict(seed=0, Q_model={"fcnet_hiddens": [16]}, policy_model={"fcnet_hiddens": [16]},
                                learning_starts=64, train_batch_size=32, timesteps_per_iteration=200,
                                min_iter_time_s=0, log_sys_usage=False, n_step=2, prioritized_replay=True)),
    ("SAC", "CartPole-v1", dict(seed=0, Q_model={"fcnet_hiddens": [16]}, policy_model={"fcnet_hiddens": [16]},
                                learning_starts=64, train_batch_size=32, timesteps_per_iteration=200,
                                min_iter_time_s=0, log_sys_usage=False)),
    ("DDPG", "Pendulum-v1", dict(seed=0, actor_hiddens=[16], critic_hiddens=[16], learning_starts=64,
                                 train_batch_size=32, timesteps_per_iteration=200, min_iter_time_s=0,
                                 log_sys_usage=False, exploration_config={"random_timesteps": 100})),
    ("TD3", "Pendulum-v1", dict(seed=0, actor_hiddens=[16], critic_hiddens=[16], learning_starts=64,
                                train_batch_size=32, timesteps_per_iteration=200, min_iter_time_s=0,
                                log_sys_usage=False, exploration_config={"random_timesteps": 100})),
]


def assert_resumes_bit_identically(trainer_class: type, env: Any, config: dict, tmp_path: Path) -> dict:
    """Trains, saves, restores into a second trainer (other seed) and the first: the replay
    buffers match and both then train to bit-identical weights. Returns the first result."""
    a = trainer_class(env=env, config=config, logdir=str(tmp_path / "a"))
    result = a.train()
    path = a.save()
    b = trainer_class(env=env, config=dict(config, seed=5), logdir=str(tmp_path / "b"))
    b.restore(path)
    for key, value in a.local_replay_buffer.get_state().items():
        np.testing.assert_array_equal(value, b.local_replay_buffer.get_state()[key], err_msg=key)
    a.restore(path)
    for _ in range(2):
        a.train()
        b.train()
    wa, wb = a.get_weights()["default_policy"], b.get_weights()["default_policy"]
    assert all(wa[k].tobytes() == wb[k].tobytes() for k in wa)
    a.stop()
    b.stop()
    return result
