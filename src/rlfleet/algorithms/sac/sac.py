"""Soft Actor-Critic: continuous (squashed Gaussian) and discrete actions, twin Q,
Polyak-averaged targets, automatic entropy tuning. The loop is
`OffPolicyTrainer.training_step`."""
from __future__ import annotations

import numbers
from typing import Any, List

from rlfleet.algorithms.common.off_policy import OffPolicyTrainer
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy
from rlfleet.config import (ConfigKey, InvalidValue, activation, algorithm_config, boolean, dict_value,
                            not_available, number_above, number_in, optional, override,
                            positive_int_list)

K = ConfigKey


def _target_entropy(v: Any) -> Any:
    if v in (None, "auto") or (isinstance(v, numbers.Real) and not isinstance(v, bool)):
        return v
    raise InvalidValue("'auto' (-|A| for Box actions, 0.98 * log(n) for Discrete(n)) or a number")


def _net_keys(name: str, what: str) -> List[ConfigKey]:
    return [
        K(name, {}, f"The {what}: fcnet_hiddens and fcnet_activation.", dict_value()),
        K(f"{name}.fcnet_hiddens", [256, 256], f"Hidden layer sizes of the {what}.", positive_int_list),
        K(f"{name}.fcnet_activation", "relu", f"Activation of the hidden layers of the {what}.", activation),
    ]


ALGO_KEYS: List[ConfigKey] = [
    K("twin_q", True, "Clipped double Q: two Q-nets, the smaller estimate is the target.", boolean),
    *_net_keys("Q_model", "Q-networks"),
    *_net_keys("policy_model", "policy network"),
    # SAC's tanh-squashed Gaussian acts in [-1, 1] (Haarnoja et al. 2018, arXiv:1801.01290,
    # appendix C) and the sampler unsquashes to the env's bounds, so clipping is then moot.
    override("clip_actions", False),
    override("normalize_actions", True),
    K("tau", 5e-3, "Polyak averaging of the targets per update: target <- tau * online + (1 - tau) * target.",
      number_above(0, 1)),
    K("initial_alpha", 1.0, "Initial entropy temperature alpha.", number_above(0)),
    K("target_entropy", "auto", "Entropy alpha is tuned towards: 'auto' (-|A| for Box actions, "
      "0.98 * log(n) for Discrete(n)) or a number.", _target_entropy),
    override("timesteps_per_iteration", 100),
    *replay_keys(buffer_size=int(1e6), prioritized_replay=False, learning_starts=1500,
                 target_network_update_freq=0),
    K("optimization", {}, "Learning rates of the three optimizers; see optimization.*.", dict_value()),
    K("optimization.actor_learning_rate", 3e-4, "Learning rate of the policy network.", number_in(0)),
    K("optimization.critic_learning_rate", 3e-4, "Learning rate of the Q-networks.", number_in(0)),
    K("optimization.entropy_learning_rate", 3e-4, "Learning rate of the entropy temperature alpha.",
      number_in(0)),
    K("grad_clip", None, "Clip each network's gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("rollout_fragment_length", 1),
    override("train_batch_size", 256),
    override("num_workers", 0),
    override("min_iter_time_s", 1),
    K("_deterministic_loss", False, "Use the policy's mean instead of samples inside the loss (debugging).", boolean),
    K("_use_beta_distribution", False, "Beta instead of squashed Gaussian action distribution for Box actions.",
      not_available("needs a Beta action distribution", False)),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class SACTrainer(OffPolicyTrainer):
    """Soft Actor-Critic."""

    _name = "SAC"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = SACTorchPolicy
