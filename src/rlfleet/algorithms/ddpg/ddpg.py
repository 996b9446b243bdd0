"""DDPG: deterministic policy gradient with replay, target networks and action noise.
The loop is `OffPolicyTrainer.training_step`; TD3 (`rlfleet.algorithms.td3`) is this
trainer with TD3's defaults."""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.ddpg.ddpg_policy import DDPGTorchPolicy
from rlfleet.algorithms.common.off_policy import OffPolicyTrainer
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.config import (ConfigKey, activation, algorithm_config, boolean, int_at_least, number_above,
                            number_in, optional, override, positive_int_list)

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = [
    # TD3's tricks, off for plain DDPG: clipped double Q, delayed actor updates, target
    # policy smoothing with clipped Gaussian noise.
    K("twin_q", False, "Clipped double Q: two critics, the smaller estimate is the target (TD3).", boolean),
    K("policy_delay", 1, "Critic updates per actor and target update (TD3: 2).", int_at_least(1)),
    K("smooth_target_policy", False, "Add clipped Gaussian noise to the target policy's actions (TD3).", boolean),
    K("target_noise", 0.2, "Stddev of the target policy smoothing noise.", number_in(0)),
    K("target_noise_clip", 0.5, "The smoothing noise is clipped to [-target_noise_clip, target_noise_clip].",
      number_in(0)),
    override("evaluation_config", {"explore": False}),
    K("actor_hiddens", [400, 300], "Hidden layer sizes of the actor.", positive_int_list),
    K("actor_hidden_activation", "relu", "Activation of the actor's hidden layers.", activation),
    K("critic_hiddens", [400, 300], "Hidden layer sizes of the critic(s).", positive_int_list),
    K("critic_hidden_activation", "relu", "Activation of the critic's hidden layers.", activation),
    override("exploration_config", {
        "type": "OrnsteinUhlenbeckNoise",
        "random_timesteps": 1000,
        "ou_base_scale": 0.1,
        "ou_theta": 0.15,
        "ou_sigma": 0.2,
        "initial_scale": 1.0,
        "final_scale": 0.02,
        "scale_timesteps": 10000,
    }),
    override("timesteps_per_iteration", 1000),
    *replay_keys(learning_starts=1500, target_network_update_freq=0),
    K("critic_lr", 1e-3, "Learning rate of the critic(s).", number_in(0)),
    K("actor_lr", 1e-3, "Learning rate of the actor.", number_in(0)),
    K("tau", 0.002, "Polyak averaging per update: target <- tau * online + (1 - tau) * target.",
      number_above(0, 1)),
    K("use_huber", False, "Huber loss instead of squared error for the critic.", boolean),
    K("huber_threshold", 1.0, "Where the Huber loss turns from quadratic to linear.", number_in(0)),
    K("l2_reg", 1e-6, "Weight decay (sum of squares / 2 of weight matrices) added to both losses.",
      number_in(0)),
    K("grad_clip", None, "Clip each network's gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("rollout_fragment_length", 1),
    override("train_batch_size", 256),
    override("num_workers", 0),
    override("min_iter_time_s", 1),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class DDPGTrainer(OffPolicyTrainer):
    """Deep Deterministic Policy Gradient (and, with its defaults, TD3)."""

    _name = "DDPG"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = DDPGTorchPolicy
