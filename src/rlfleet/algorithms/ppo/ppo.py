"""PPO trainer: sample a train batch, standardise advantages, minibatch SGD, adapt KL."""
from __future__ import annotations

from typing import Any, Dict

from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy
from rlfleet.algorithms.multi_agent import sample_train_batch, trainable_batches
from rlfleet.config import with_common_config
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import standardized
from rlfleet.trainer import Trainer

DEFAULT_CONFIG = with_common_config({
    # Critic and advantage estimation.
    "use_critic": True,
    "use_gae": True,
    "lambda": 1.0,
    # Initial coefficient of the KL penalty, adapted towards `kl_target`.
    "kl_coeff": 0.2,
    "kl_target": 0.01,
    "rollout_fragment_length": 200,
    "train_batch_size": 4000,
    # Minibatch size and passes of SGD over each train batch.
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 30,
    "shuffle_sequences": True,
    "lr": 5e-5,
    "lr_schedule": None,
    "vf_loss_coeff": 1.0,
    "model": {"vf_share_layers": False},
    "entropy_coeff": 0.0,
    "entropy_coeff_schedule": None,
    # Surrogate clip range, and the clip on the squared value error.
    "clip_param": 0.3,
    "vf_clip_param": 10.0,
    "grad_clip": None,
    "batch_mode": "truncate_episodes",
    "observation_filter": "NoFilter",
})


class PPOTrainer(Trainer):
    """Proximal Policy Optimization."""

    _name = "PPO"
    _default_config = DEFAULT_CONFIG
    _policy_class = PPOTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        if config["sgd_minibatch_size"] > config["train_batch_size"]:
            raise ValueError(
                f"'sgd_minibatch_size': {config['sgd_minibatch_size']} must be <= 'train_batch_size' "
                f"({config['train_batch_size']})"
            )
        if config["entropy_coeff"] < 0:
            raise ValueError(f"'entropy_coeff': {config['entropy_coeff']} must be >= 0")
        if config["use_gae"] and not config["use_critic"]:
            raise ValueError("'use_gae': True needs 'use_critic': True (GAE is built on the value function)")
        for key in ("num_sgd_iter", "sgd_minibatch_size"):
            if not isinstance(config[key], int) or config[key] < 1:
                raise ValueError(f"'{key}': {config[key]!r} must be an int >= 1")
        for key in ("clip_param", "vf_clip_param", "kl_target"):
            if config[key] <= 0:
                raise ValueError(f"'{key}': {config[key]!r} must be > 0")

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
