"""Soft Actor-Critic: continuous (squashed Gaussian) and discrete actions, twin Q,
Polyak-averaged targets, automatic entropy tuning. The loop is
`OffPolicyTrainer.training_step`."""
from __future__ import annotations

from rlfleet.algorithms.off_policy import OffPolicyTrainer, replay_config
from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy
from rlfleet.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    "twin_q": True,
    # The Q-nets and the policy net.
    "Q_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    "policy_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    # Reference SAC acts in [-1, 1] and lets the sampler unsquash; clipping is then moot.
    "clip_actions": False,
    "normalize_actions": True,
    # Polyak averaging of the targets per update: target <- tau * online + (1 - tau) * target.
    "tau": 5e-3,
    "initial_alpha": 1.0,
    # "auto": -|A| for Box actions, 0.98 * log(n) for Discrete(n); or a number.
    "target_entropy": "auto",
    "timesteps_per_iteration": 100,
    **replay_config(
        buffer_size=int(1e6), prioritized_replay=False, learning_starts=1500, target_network_update_freq=0,
    ),
    "optimization": {
        "actor_learning_rate": 3e-4,
        "critic_learning_rate": 3e-4,
        "entropy_learning_rate": 3e-4,
    },
    "grad_clip": None,
    "rollout_fragment_length": 1,
    "train_batch_size": 256,
    "num_workers": 0,
    "min_iter_time_s": 1,
    # Use the policy's mean instead of samples inside the loss (debugging).
    "_deterministic_loss": False,
    "_use_beta_distribution": False,
})


class SACTrainer(OffPolicyTrainer):
    """Soft Actor-Critic."""

    _name = "SAC"
    _default_config = DEFAULT_CONFIG
    _policy_class = SACTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        te = config["target_entropy"]
        if te not in (None, "auto") and (isinstance(te, bool) or not isinstance(te, (int, float))):
            raise ValueError(f"'target_entropy': {te!r} must be 'auto' or a number")
        if not config["initial_alpha"] > 0:
            raise ValueError(f"'initial_alpha': {config['initial_alpha']!r} must be > 0")
        if not 0 < config["tau"] <= 1:
            raise ValueError(f"'tau': {config['tau']!r} must be in (0, 1]")
