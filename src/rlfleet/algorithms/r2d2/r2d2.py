"""R2D2 (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed RL"): DQN with
a recurrent Q-network learning from replayed sequences.

The loop is `OffPolicyTrainer.training_step`; what differs is what the buffer holds: each
sampled episode is cut into sequences of `replay_burn_in + model.max_seq_len` rows that
overlap by the burn-in (`SequenceReplayTrainer`, replay/sequences.py).
"""
from __future__ import annotations

from typing import Any, List

from rlfleet.algorithms.dqn.dqn import ALGO_KEYS as DQN_KEYS
from rlfleet.algorithms.r2d2.r2d2_policy import R2D2TorchPolicy
from rlfleet.algorithms.common.sequence_replay import SequenceReplayTrainer, sequence_replay_keys
from rlfleet.config import (ConfigKey, InvalidValue, algorithm_config, boolean, not_available, number_above,
                            with_defaults)

K = ConfigKey


def _no_shards(v: Any) -> Any:
    if v != 0:
        raise InvalidValue("0 (R2D2 keeps one buffer in its process); for replay shards run 'APEX_R2D2', R2D2 over "
                           "Ape-X's replay shards, with this num_replay_buffer_shards")
    return v

_UNAVAILABLE = {
    "num_atoms": K("num_atoms", 1, "C51 atoms; R2D2 learns expected Q-values only.",
                   not_available("needs a distributional recurrent Q head", 1)),
    "noisy": K("noisy", False, "Noisy nets; R2D2 explores epsilon-greedily.",
               not_available("needs noisy layers in the recurrent Q heads", False)),
}

ALGO_KEYS: List[ConfigKey] = [
    _UNAVAILABLE.get(key.name, key) for key in with_defaults(DQN_KEYS, {
        # RLlib 1.x's R2D2 defaults (`rllib/agents/dqn/r2d2.py`; num_workers stays rlfleet's 0, see DESIGN.md).
        "lr": 1e-4, "gamma": 0.997, "train_batch_size": 64 * 20, "adam_epsilon": 1e-3,
        "batch_mode": "complete_episodes", "buffer_size": 100000, "prioritized_replay": False,
        "target_network_update_freq": 2500,
        # R2D2 is recurrent by definition (Kapturowski et al. 2019), so its LSTM is on by default.
        "model.use_lstm": True,
    })
] + sequence_replay_keys() + [
    K("use_h_function", True, "Rescale targets with h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x (and bootstrap "
      "through its inverse).", boolean),
    K("h_function_epsilon", 1e-3, "The eps of the h function.", number_above(0)),
    K("num_replay_buffer_shards", 0, "0: R2D2 keeps its one replay buffer in the trainer's process; for Ape-X's "
      "replay shards (Ray actors the workers add to) run APEX_R2D2.", _no_shards),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class R2D2Trainer(SequenceReplayTrainer):
    """Recurrent Replay Distributed DQN; the loop is `OffPolicyTrainer.training_step`."""

    _name = "R2D2"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = R2D2TorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        require_recurrent_model(self._name, config)


def require_recurrent_model(name: str, config: dict) -> None:
    """R2D2 (and APEX_R2D2) learn a recurrent Q-network: refuses a model config without memory."""
    model = config["model"]
    if not (model.get("use_lstm") or model.get("use_attention")):
        raise ValueError(f"{name} learns a recurrent Q-network: set 'model': {{'use_lstm': True}} (or "
                         "'use_attention': True); for a feed-forward Q-network use DQN (or APEX)")
