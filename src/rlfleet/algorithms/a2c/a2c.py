"""A2C: synchronous advantage actor-critic. Sample a train batch from every worker, one
gradient update on it (summed over `microbatch_size` microbatches when set), broadcast."""
from __future__ import annotations

from typing import Any, Dict, List

from rlfleet.algorithms.a2c.a2c_policy import A2CTorchPolicy
from rlfleet.algorithms.common.multi_agent import sample_train_batch, trainable_batches
from rlfleet.config import (ConfigKey, algorithm_config, int_at_least, number_above, number_in, one_of, optional,
                            override, schedule)
from rlfleet.rollout.postprocessing import check_gae_needs_critic
from rlfleet.trainer import Trainer

K = ConfigKey

# The actor-critic keys A2C and A3C share (A3C changes a few defaults).
ACTOR_CRITIC_KEYS: List[ConfigKey] = [
    K("use_critic", True, "Learn a value function and bootstrap from it (needed by GAE)."),
    K("use_gae", True, "Generalized Advantage Estimation; False: discounted returns minus the value."),
    K("lambda", 1.0, "GAE's lambda: 0 is the one-step TD error, 1 the Monte-Carlo return.", number_in(0, 1)),
    K("grad_clip", 40.0, "Clip the global gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("lr", 0.0001),
    K("lr_schedule", None, "Learning rate over timesteps: [[timestep, lr], ...]; None keeps lr.",
      schedule("lr_schedule")),
    K("vf_loss_coeff", 0.5, "Weight of the value loss (a sum over the batch) in the total loss.", number_in(0)),
    K("entropy_coeff", 0.01, "Weight of the entropy bonus (a sum over the batch).", number_in(0)),
    K("entropy_coeff_schedule", None, "entropy_coeff over timesteps: [[timestep, coeff], ...]; None keeps it.",
      schedule("entropy_coeff_schedule")),
    override("batch_mode", "truncate_episodes"),
    override("observation_filter", "NoFilter"),
]

# The optimizer choice, shared with IMPALA and APPO (RLlib's A2C has only Adam):
# RMSprop is SB3's A2C optimizer (alpha 0.99, eps 1e-5 on a mean loss; see benchmarks/zoo.py).
OPTIMIZER_KEYS: List[ConfigKey] = [
    K("opt_type", "adam", "The optimizer: adam (with the `optimizer` key's arguments) or rmsprop (torch.optim.RMSprop "
      "with decay, momentum, epsilon).", one_of("adam", "rmsprop")),
    K("decay", 0.99, "RMSprop's decay (alpha); only with opt_type rmsprop.", number_in(0, 1)),
    K("momentum", 0.0, "RMSprop's momentum; only with opt_type rmsprop.", number_in(0)),
    K("epsilon", 0.1, "RMSprop's epsilon (added to the root of the mean square); only with opt_type rmsprop.",
      number_above(0)),
]

ALGO_KEYS: List[ConfigKey] = ACTOR_CRITIC_KEYS + OPTIMIZER_KEYS + [
    override("rollout_fragment_length", 20),
    override("train_batch_size", 200),
    override("min_iter_time_s", 10),
    K("microbatch_size", None, "Sum the gradient over microbatches of this many steps before one update "
      "(less memory for big train batches); None: the whole train batch at once.",
      optional(int_at_least(1), "the whole train batch")),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class A2CTrainer(Trainer):
    """Synchronous advantage actor-critic."""

    samples_train_batch = True

    _name = "A2C"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = A2CTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        check_gae_needs_critic(config)
        mb = config["microbatch_size"]
        if mb is not None and mb > config["train_batch_size"]:
            raise ValueError(f"'microbatch_size': {mb} must be <= 'train_batch_size' ({config['train_batch_size']}) "
                             "or None")
        if config["opt_type"] == "rmsprop" and config["optimizer"]:
            raise ValueError(f"'optimizer': {config['optimizer']!r} holds Adam arguments, but 'opt_type' is 'rmsprop': "
                             "set RMSprop's with 'decay', 'momentum' and 'epsilon' (or use 'opt_type': 'adam')")

    def training_step(self) -> Dict[str, Any]:
        # === sample ===
        batch = sample_train_batch(self)
        # === learn: one update per trainable policy ===
        microbatch = self.config["microbatch_size"]
        learner_info: Dict[str, Any] = {}
        for pid, policy_batch in trainable_batches(self, batch):
            policy = self.get_policy(pid)
            if microbatch is None:
                learner_info[pid] = policy.learn_on_batch(policy_batch)
            else:
                learner_info[pid] = policy.learn_on_microbatches(policy_batch, microbatch)
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return learner_info
