"""PPO trainer: sample a train batch, standardise advantages, minibatch SGD, adapt KL."""
from __future__ import annotations

from typing import Any, Dict, List

from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy
from rlfleet.algorithms.common.multi_agent import sample_train_batch, trainable_batches
from rlfleet.config import (ConfigKey, algorithm_config, boolean, int_at_least, number_above,
                            number_in, optional, override, schedule)
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import check_gae_needs_critic, standardized
from rlfleet.trainer import Trainer

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = [
    # Critic and advantage estimation.
    K("use_critic", True, "Learn a value function and bootstrap from it (needed by GAE).", boolean),
    K("use_gae", True, "Generalized Advantage Estimation; False: discounted returns minus the value.", boolean),
    K("lambda", 1.0, "GAE's lambda: 0 is the one-step TD error, 1 the Monte-Carlo return.", number_in(0, 1)),
    # KL penalty, adapted towards kl_target after each train batch.
    K("kl_coeff", 0.2, "Initial coefficient of the KL penalty (0: no penalty).", number_in(0)),
    K("kl_target", 0.01, "KL divergence the penalty coefficient is adapted towards.", number_above(0)),
    override("rollout_fragment_length", 200),
    override("train_batch_size", 4000),
    # Minibatch SGD over each train batch.
    K("sgd_minibatch_size", 128, "Steps per SGD minibatch (<= train_batch_size).", int_at_least(1)),
    K("num_sgd_iter", 30, "Passes of SGD over each train batch.", int_at_least(1)),
    K("shuffle_sequences", True, "Shuffle the train batch (whole sequences for RNNs) before each pass.", boolean),
    override("lr", 5e-5),
    K("lr_schedule", None, "Learning rate over timesteps: [[timestep, lr], ...]; None keeps lr.",
      schedule("lr_schedule")),
    K("vf_loss_coeff", 1.0, "Weight of the value loss in the total loss.", number_in(0)),
    override("model.vf_share_layers", False),
    K("entropy_coeff", 0.0, "Weight of the entropy bonus.", number_in(0)),
    K("entropy_coeff_schedule", None, "entropy_coeff over timesteps: [[timestep, coeff], ...]; None keeps it.",
      schedule("entropy_coeff_schedule")),
    # Surrogate clip range, and the clip on the squared value error.
    K("clip_param", 0.3, "PPO's clip range of the probability ratio: [1 - clip, 1 + clip].", number_above(0)),
    K("vf_clip_param", 10.0, "Clip on the squared value error (sensitive to the reward scale): errors above its "
      "square root give the critic no gradient. Not the clip on the value's change of SB3's `clip_range_vf` or "
      "CleanRL's `clip_coef`; to port those, keep this above the squared errors your returns give.", number_above(0)),
    K("grad_clip", None, "Clip the global gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("batch_mode", "truncate_episodes"),
    override("observation_filter", "NoFilter"),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class PPOTrainer(Trainer):
    """Proximal Policy Optimization."""

    samples_train_batch = True

    _name = "PPO"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = PPOTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        # Rules that span several keys; each key's own range is its ConfigKey's check.
        if config["sgd_minibatch_size"] > config["train_batch_size"]:
            raise ValueError(
                f"'sgd_minibatch_size': {config['sgd_minibatch_size']} must be <= 'train_batch_size' "
                f"({config['train_batch_size']})"
            )
        check_gae_needs_critic(config)

    def training_step(self) -> Dict[str, Any]:
        # === sample (one SampleBatch per policy) ===
        batch = sample_train_batch(self)
        # === learn: each trainable policy on its own samples ===
        learner_info: Dict[str, Any] = {}
        for pid, policy_batch in trainable_batches(self, batch):
            policy_batch[SampleBatch.ADVANTAGES] = standardized(policy_batch[SampleBatch.ADVANTAGES])
            policy = self.get_policy(pid)
            info = policy.multi_epoch_sgd(policy_batch, self.config["num_sgd_iter"],
                                          self.config["sgd_minibatch_size"], shuffle=self.config["shuffle_sequences"])
            if policy.config["kl_coeff"] > 0:
                info["learner_stats"]["kl_coeff"] = policy.kl_coeff
                policy.update_kl(info["learner_stats"]["kl"])
            learner_info[pid] = info
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return learner_info
