"""DDPG: deterministic policy gradient with replay, target networks and action noise.
The loop is `OffPolicyTrainer.training_step`; TD3 (`rlfleet.algorithms.td3`) is this
trainer with TD3's defaults."""
from __future__ import annotations

from rlfleet.algorithms.ddpg.ddpg_policy import DDPGTorchPolicy
from rlfleet.algorithms.off_policy import OffPolicyTrainer, replay_config
from rlfleet.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # TD3's tricks, off for plain DDPG: clipped double Q, delayed actor updates, target
    # policy smoothing with clipped Gaussian noise.
    "twin_q": False,
    "policy_delay": 1,
    "smooth_target_policy": False,
    "target_noise": 0.2,
    "target_noise_clip": 0.5,
    "evaluation_config": {"explore": False},
    "actor_hiddens": [400, 300],
    "actor_hidden_activation": "relu",
    "critic_hiddens": [400, 300],
    "critic_hidden_activation": "relu",
    "exploration_config": {
        "type": "OrnsteinUhlenbeckNoise",
        "random_timesteps": 1000,
        "ou_base_scale": 0.1,
        "ou_theta": 0.15,
        "ou_sigma": 0.2,
        "initial_scale": 1.0,
        "final_scale": 0.02,
        "scale_timesteps": 10000,
    },
    "timesteps_per_iteration": 1000,
    **replay_config(learning_starts=1500, target_network_update_freq=0),
    "critic_lr": 1e-3,
    "actor_lr": 1e-3,
    # Polyak averaging per update: target <- tau * online + (1 - tau) * target.
    "tau": 0.002,
    "use_huber": False,
    "huber_threshold": 1.0,
    # Weight decay (sum of squares / 2 of weight matrices) added to both losses.
    "l2_reg": 1e-6,
    "grad_clip": None,
    "rollout_fragment_length": 1,
    "train_batch_size": 256,
    "num_workers": 0,
    "min_iter_time_s": 1,
})


class DDPGTrainer(OffPolicyTrainer):
    """Deep Deterministic Policy Gradient (and, with its defaults, TD3)."""

    _name = "DDPG"
    _default_config = DEFAULT_CONFIG
    _policy_class = DDPGTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        delay = config["policy_delay"]
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 1:
            raise ValueError(f"'policy_delay': {delay!r} must be an int >= 1")
        for key in ("target_noise", "target_noise_clip", "l2_reg", "huber_threshold"):
            if not config[key] >= 0:
                raise ValueError(f"'{key}': {config[key]!r} must be >= 0")
        if not 0 < config["tau"] <= 1:
            raise ValueError(f"'tau': {config['tau']!r} must be in (0, 1]")
        for key in ("actor_hiddens", "critic_hiddens"):
            v = config[key]
            if not isinstance(v, (list, tuple)) or not all(isinstance(h, int) and h > 0 for h in v):
                raise ValueError(f"'{key}': {v!r} must be a list of ints > 0")
