"""RNNSAC: Soft Actor-Critic with a recurrent actor and recurrent critics, learning from
replayed sequences with burn-in (RLlib 1.x's `rllib/agents/sac/rnnsac.py`). Box and Discrete actions.

The loop is `OffPolicyTrainer.training_step` with sequence replay (`SequenceReplayTrainer`,
replay/sequences.py). `policy_model` and `Q_model` give each network its feature layers and
its LSTM (`use_lstm`, `lstm_cell_size`, `lstm_use_prev_action`, `lstm_use_prev_reward`);
`model.max_seq_len` the sequence length.
"""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.rnnsac.rnnsac_policy import RNNSACTorchPolicy
from rlfleet.algorithms.sac.sac import ALGO_KEYS as SAC_KEYS
from rlfleet.algorithms.common.sequence_replay import SequenceReplayTrainer, sequence_replay_keys
from rlfleet.config import ConfigKey, algorithm_config, boolean, int_at_least, not_available, with_defaults

K = ConfigKey


def _memory_keys(name: str, what: str) -> List[ConfigKey]:
    return [
        K(f"{name}.use_lstm", True, f"An LSTM memory in the {what} (RNNSAC's networks are recurrent).",
          not_available("feed-forward networks here: use SAC", True)),
        K(f"{name}.lstm_cell_size", 256, f"LSTM state size of the {what}.", int_at_least(1)),
        K(f"{name}.lstm_use_prev_action", False, f"Feed the previous action into the {what}'s LSTM.", boolean),
        K(f"{name}.lstm_use_prev_reward", False, f"Feed the previous reward into the {what}'s LSTM.", boolean),
    ]


ALGO_KEYS: List[ConfigKey] = with_defaults(SAC_KEYS, {
    # RLlib 1.x's RNNSAC default over SAC's (sequences are cut from whole episodes).
    "batch_mode": "complete_episodes",
}) + _memory_keys("policy_model", "policy network") + _memory_keys("Q_model", "Q-networks") + sequence_replay_keys(
    "The policy's memory starts each replayed sequence from zeros (True) or from the state stored with it when "
    "it was acted (False); the critics' memories are not carried while acting and always start from zeros, "
    "warmed by the burn-in.")

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class RNNSACTrainer(SequenceReplayTrainer):
    """Recurrent Soft Actor-Critic; the loop is `OffPolicyTrainer.training_step`."""

    _name = "RNNSAC"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = RNNSACTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        for key in ("use_lstm", "use_attention"):
            if config["model"].get(key):
                raise ValueError(f"RNNSAC takes its memories from 'policy_model' and 'Q_model' (each has use_lstm, "
                                 f"lstm_cell_size, ...); 'model.{key}': True would be ignored: set it False")
