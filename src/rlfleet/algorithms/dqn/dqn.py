"""DQN (Mnih et al. 2015) with the Rainbow options (Hessel et al. 2018, arXiv:1710.02298)
that RLlib 1.x offers: double Q, dueling heads, n-step returns, prioritized replay, noisy
nets and C51. SimpleQ is the plain variant (none of those)."""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.dqn.dqn_policy import DQNTorchPolicy
from rlfleet.algorithms.common.off_policy import OffPolicyTrainer
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.config import (ConfigKey, algorithm_config, finite_number, int_at_least, number_above,
                            boolean, number_in, optional, override, positive_int_list, schedule,
                            with_defaults)

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = [
    # RLlib 1.x's SimpleQ rows (`rllib/agents/dqn/simple_q.py`).
    override("exploration_config", {
        "type": "EpsilonGreedy",
        "initial_epsilon": 1.0,
        "final_epsilon": 0.02,
        "epsilon_timesteps": 10000,
    }),
    override("evaluation_config", {"explore": False}),
    override("timesteps_per_iteration", 1000),
    override("lr", 5e-4),
    K("adam_epsilon", 1e-8, "Adam's epsilon.", number_above(0)),
    K("grad_clip", 40, "Clip the global gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("rollout_fragment_length", 4),
    override("train_batch_size", 32),
    override("num_workers", 0),
    override("min_iter_time_s", 1),
    *replay_keys(),
    # DQN's own: the Rainbow extensions.
    K("num_atoms", 1, "C51: atoms of the return distribution (1: plain expected Q; > 1: C51).", int_at_least(1)),
    K("v_min", -10.0, "C51: lowest return of the distribution's support.", finite_number),
    K("v_max", 10.0, "C51: highest return of the distribution's support.", finite_number),
    K("noisy", False, "Noisy nets: noisy linear layers in the Q heads explore through their noise.", boolean),
    K("sigma0", 0.5, "Noisy nets: initial noise scale, sigma0 / sqrt(fan_in).", number_in(0)),
    K("dueling", True, "Dueling heads: separate state-value and advantage streams.", boolean),
    K("hiddens", [256], "Hidden layers (ReLU) of each Q head after the model's layers.", positive_int_list),
    K("double_q", True, "Double Q-learning: the online net picks the target's action.", boolean),
    K("lr_schedule", None, "Learning rate over timesteps: [[timestep, lr], ...]; None keeps lr.",
      schedule("lr_schedule")),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)

# SimpleQ is DQN with every extension off.
SIMPLE_Q_KEYS: List[ConfigKey] = with_defaults(ALGO_KEYS, {
    "prioritized_replay": False, "dueling": False, "hiddens": [], "double_q": False,
})

SIMPLE_Q_DEFAULT_CONFIG = algorithm_config(SIMPLE_Q_KEYS)


class DQNTrainer(OffPolicyTrainer):
    """Deep Q-Networks; the loop is `OffPolicyTrainer.training_step`."""

    _name = "DQN"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = DQNTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        # Rules that span several keys; each key's own range is its ConfigKey's check.
        if config["num_atoms"] > 1 and not config["v_min"] < config["v_max"]:
            raise ValueError(f"'v_min' ({config['v_min']!r}) must be < 'v_max' ({config['v_max']!r}) "
                             f"for C51 ('num_atoms': {config['num_atoms']})")


class SimpleQTrainer(DQNTrainer):
    """DQN without double Q, dueling, prioritized replay, n-step, noisy nets or C51."""

    _name = "SimpleQ"
    _default_config = SIMPLE_Q_DEFAULT_CONFIG
    _algo_keys = SIMPLE_Q_KEYS
