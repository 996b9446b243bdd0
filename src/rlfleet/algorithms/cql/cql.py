"""Conservative Q-Learning: SAC's replay loop and networks, learning from offline `input`
(files written by `output`, Minari, a custom reader), with a conservative critic
(cql_policy.py). Its episode returns come from evaluation in the env
(`evaluation_interval`, `evaluation_config: {"input": "sampler"}`).

The loop is `OffPolicyTrainer.training_step`: each call reads one batch of the input
(instead of sampling the env), stores it in the replay buffer and replays from it. The
input reader cycles over its files, so the buffer holds the dataset (repeated once per pass).
"""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.cql.cql_policy import CQLTorchPolicy
from rlfleet.algorithms.sac.sac import ALGO_KEYS as SAC_KEYS, SACTrainer
from rlfleet.config import ConfigKey, algorithm_config, boolean, finite_number, int_at_least, number_above, \
    number_in, with_defaults

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = with_defaults(SAC_KEYS, {"learning_starts": 256}) + [
    K("bc_iters", 20000, "Number of first updates in which the actor clones the logged actions (maximises "
      "their log-likelihood) instead of maximising Q.", int_at_least(0)),
    K("temperature", 1.0, "Temperature of the logsumexp over sampled actions in the conservative penalty.",
      number_above(0)),
    K("num_actions", 10, "Actions sampled per state from each of: the uniform distribution, pi(.|s), pi(.|s') "
      "for the conservative penalty's logsumexp.", int_at_least(1)),
    K("lagrangian", False, "Tune the penalty's weight alpha' by dual gradient descent (its own optimizer) so "
      "that the weighted gap stays near lagrangian_thresh.", boolean),
    K("lagrangian_thresh", 5.0, "With lagrangian: the target of min_q_weight * (soft max of Q over sampled "
      "actions - Q of logged actions).", finite_number),
    K("min_q_weight", 5.0, "Weight of the conservative penalty (soft max of Q over sampled actions minus Q of "
      "the logged actions) in the critic loss.", number_in(0)),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class CQLTrainer(SACTrainer):
    """Conservative Q-Learning (continuous actions), usually on offline `input`.

    Update rate: with `training_intensity` None, one update of `train_batch_size` per row
    read (RLlib 1.x's CQL does one per batch read, which ties the update rate to how the
    data's lines were cut); a number: replayed rows per row read, as for SAC.
    """

    _name = "CQL"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = CQLTorchPolicy

    def updates_owed(self, steps_sampled: int) -> int:
        if self.config.get("training_intensity") is None:
            return int(steps_sampled)
        return super().updates_owed(steps_sampled)
