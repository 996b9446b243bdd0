"""TD3 (Fujimoto et al. 2018): DDPG's trainer and policy with TD3's defaults (twin Q,
delayed actor updates, target policy smoothing, Gaussian exploration noise)."""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.ddpg.ddpg import ALGO_KEYS as DDPG_KEYS
from rlfleet.algorithms.ddpg.ddpg import DDPGTrainer
from rlfleet.config import ConfigKey, algorithm_config, with_defaults

ALGO_KEYS: List[ConfigKey] = with_defaults(DDPG_KEYS, {
    "twin_q": True,
    "policy_delay": 2,
    "smooth_target_policy": True,
    "target_noise": 0.2,
    "target_noise_clip": 0.5,
    "exploration_config": {
        # Another type than DDPG's: this dict is the whole exploration config.
        "type": "GaussianNoise",
        "random_timesteps": 10000,
        "stddev": 0.1,
        "initial_scale": 1.0,
        "final_scale": 1.0,
        "scale_timesteps": 1,
    },
    "learning_starts": 10000,
    "actor_hiddens": [400, 300],
    "critic_hiddens": [400, 300],
    "n_step": 1,
    "gamma": 0.99,
    "actor_lr": 1e-3,
    "critic_lr": 1e-3,
    "l2_reg": 0.0,
    "tau": 5e-3,
    "train_batch_size": 100,
    "use_huber": False,
    "target_network_update_freq": 0,
    "num_workers": 0,
    "buffer_size": int(1e6),
    "prioritized_replay": False,
    "clip_rewards": False,
})

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class TD3Trainer(DDPGTrainer):
    """Twin Delayed DDPG."""

    _name = "TD3"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
