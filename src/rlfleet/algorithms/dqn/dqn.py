"""DQN (Mnih et al. 2015) with the Rainbow options the reference offers: double Q,
dueling heads, n-step returns, prioritized replay, noisy nets and C51. SimpleQ is the
plain variant (none of those)."""
from __future__ import annotations

from rlfleet.algorithms.dqn.dqn_policy import DQNTorchPolicy
from rlfleet.algorithms.off_policy import OffPolicyTrainer, replay_config
from rlfleet.config import with_common_config

# SimpleQ's keys (the reference's SimpleQ defaults), DQN's own added below.
_SIMPLE_Q_KEYS = {
    "exploration_config": {
        "type": "EpsilonGreedy",
        "initial_epsilon": 1.0,
        "final_epsilon": 0.02,
        "epsilon_timesteps": 10000,
    },
    "evaluation_config": {"explore": False},
    # One train() call runs at least this many env steps (and `min_iter_time_s` seconds).
    "timesteps_per_iteration": 1000,
    "lr": 5e-4,
    "adam_epsilon": 1e-8,
    "grad_clip": 40,
    "rollout_fragment_length": 4,
    "train_batch_size": 32,
    "num_workers": 0,
    "min_iter_time_s": 1,
}

DEFAULT_CONFIG = with_common_config({
    **_SIMPLE_Q_KEYS,
    **replay_config(),
    # C51: atoms of the return distribution (1: plain expected Q) and its support.
    "num_atoms": 1,
    "v_min": -10.0,
    "v_max": 10.0,
    # Noisy nets: noisy head layers with initial sigma0 / sqrt(fan_in).
    "noisy": False,
    "sigma0": 0.5,
    # Dueling value/advantage heads, each with `hiddens` hidden layers (ReLU).
    "dueling": True,
    "hiddens": [256],
    "double_q": True,
    "n_step": 1,
    "lr_schedule": None,
})

SIMPLE_Q_DEFAULT_CONFIG = with_common_config({
    **_SIMPLE_Q_KEYS,
    **replay_config(prioritized_replay=False),
    # SimpleQ is DQN with every extension off.
    "num_atoms": 1, "v_min": -10.0, "v_max": 10.0, "noisy": False, "sigma0": 0.5,
    "dueling": False, "hiddens": [], "double_q": False, "n_step": 1, "lr_schedule": None,
})


class DQNTrainer(OffPolicyTrainer):
    """Deep Q-Networks; the loop is `OffPolicyTrainer.training_step`."""

    _name = "DQN"
    _default_config = DEFAULT_CONFIG
    _policy_class = DQNTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        atoms = config["num_atoms"]
        if isinstance(atoms, bool) or not isinstance(atoms, int) or atoms < 1:
            raise ValueError(f"'num_atoms': {atoms!r} must be an int >= 1 (1: expected Q; > 1: C51)")
        if atoms > 1 and not config["v_min"] < config["v_max"]:
            raise ValueError(f"'v_min' ({config['v_min']!r}) must be < 'v_max' ({config['v_max']!r})")
        hiddens = config["hiddens"]
        if not isinstance(hiddens, (list, tuple)) or not all(isinstance(h, int) and h > 0 for h in hiddens):
            raise ValueError(f"'hiddens': {hiddens!r} must be a list of ints > 0")


class SimpleQTrainer(DQNTrainer):
    """DQN without double Q, dueling, prioritized replay, n-step, noisy nets or C51."""

    _name = "SimpleQ"
    _default_config = SIMPLE_Q_DEFAULT_CONFIG
