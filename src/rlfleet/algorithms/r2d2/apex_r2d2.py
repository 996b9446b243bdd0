"""APEX_R2D2: R2D2's recurrent Q-learning on Ape-X's distributed replay (the R2D2 paper's own
setting: many actors with fixed epsilons of their own, one prioritized replay, one learner).

The data flow is `ApexTrainer`'s (algorithms/apex/apex.py) unchanged: replay shards (Ray
actors with remote workers, in-process with `num_workers: 0`), a learner thread, weights
pushed every `max_weight_sync_delay` steps. What the shards hold is R2D2's: each worker cuts
its complete episodes into sequences (replay/sequences.py: `replay_burn_in + max_seq_len`
rows with the recurrent state at their start) and, with `worker_side_prioritization`, gives
each the priority mix `eta * max + (1 - eta) * mean` of its |TD errors|; the learner's new
priorities go back to the shard the sequences came from. `buffer_size` counts sequences (it is
split over the shards), `train_batch_size` steps, as in R2D2.
"""
from __future__ import annotations

from typing import Any, List

from rlfleet.algorithms.apex.apex import APEX_DEFAULTS, APEX_KEYS, ApexTrainer
from rlfleet.algorithms.apex.replay_shard import ShardItems, worker_side_items
from rlfleet.algorithms.r2d2.r2d2 import ALGO_KEYS as R2D2_KEYS
from rlfleet.algorithms.r2d2.r2d2 import require_recurrent_model
from rlfleet.algorithms.r2d2.r2d2_policy import R2D2TorchPolicy
from rlfleet.algorithms.common.sequence_replay import (policy_sequences, replayed_sequence_steps, sequence_length,
                                                sequences_per_batch, validate_sequence_replay)
from rlfleet.config import ConfigKey, algorithm_config, with_defaults
from rlfleet.policy.sample_batch import SampleBatch

# R2D2's defaults, with Ape-X's replay (prioritized, per-worker epsilons) on top. As in Ape-X,
# the learner refreshes the target network every `target_network_update_freq` TRAINED steps
# (R2D2 counts sampled ones): the R2D2 paper's period of 2500 updates of 1280 steps.
ALGO_KEYS: List[ConfigKey] = with_defaults(
    [k for k in R2D2_KEYS if k.name not in {k.name for k in APEX_KEYS}] + APEX_KEYS,
    {"prioritized_replay": True, "exploration_config": APEX_DEFAULTS["exploration_config"],
     "target_network_update_freq": 2500 * 1280})

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


def _sequences(policy: Any, rows: SampleBatch) -> SampleBatch:
    cfg = policy.config
    return policy_sequences(policy, rows, burn_in=cfg["replay_burn_in"], n_step=cfg["n_step"], gamma=cfg["gamma"])


def worker_side_sequences(worker: Any, batch: Any) -> ShardItems:
    """Runs on the rollout worker that sampled `batch` (complete episodes): each trained
    policy's replay sequences, with their initial priorities under `worker_side_prioritization`."""
    return worker_side_items(worker, batch, _sequences)


class ApexR2D2Trainer(ApexTrainer):
    """R2D2 over Ape-X's replay shards: workers add sequences, the learner thread replays them."""

    _name = "APEX_R2D2"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = R2D2TorchPolicy
    worker_side_items = staticmethod(worker_side_sequences)

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)  # Ape-X's rules (and DQN's, which R2D2 shares)
        validate_sequence_replay(self._name, config)
        require_recurrent_model(self._name, config)

    def shard_replay_starts(self, num_shards: int) -> int:
        # Shards count sequences; learning_starts counts steps (full sequences assumed).
        return self.config["learning_starts"] // (num_shards * sequence_length(self.config))

    def replay_batch_items(self) -> int:
        return sequences_per_batch(self.config)

    def replayed_steps(self, replayed: SampleBatch) -> int:
        return replayed_sequence_steps(replayed)


__all__ = ["ALGO_KEYS", "ApexR2D2Trainer", "DEFAULT_CONFIG", "worker_side_sequences"]
