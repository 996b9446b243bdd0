"""What the recurrent off-policy trainers (R2D2, RNNSAC) share: their sequence-replay keys and a
trainer whose buffers hold sequences (replay/sequences.py) instead of transitions.

Each sampled episode is cut into sequences of `replay_burn_in + model.max_seq_len` rows that
overlap by the burn-in; one buffer row per sequence. `buffer_size` counts sequences and
`train_batch_size` counts steps: each update replays
`train_batch_size // (replay_burn_in + max_seq_len)` sequences, as in RLlib 1.x's R2D2.
"""
from __future__ import annotations

from typing import Any, List

from rlfleet.algorithms.common.off_policy import OffPolicyTrainer
from rlfleet.config import ConfigKey, InvalidValue, boolean, int_at_least, number_in
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay.sequences import replay_sequences

K = ConfigKey


def _computed_sequence_length(v: Any) -> Any:
    if v != -1:
        raise InvalidValue("-1: it is computed as replay_burn_in + model.max_seq_len (set those instead)")
    return v


def sequence_replay_keys(zero_init_states_doc: str = "", zero_init_states_check=boolean) -> List[ConfigKey]:
    """The keys of sequence replay (`zero_init_states` with an algorithm's own meaning / check)."""
    return [
        K("zero_init_states", True, zero_init_states_doc or "Replayed sequences start from a zero memory (True) or "
          "from the memory stored with them when they were acted (False).", zero_init_states_check),
        K("replay_burn_in", 0, "Rows before each replayed sequence's trained rows that only warm its memory (no "
          "loss on them); sequences overlap by this many rows.", int_at_least(0)),
        K("replay_sequence_length", -1, "Rows per stored sequence: computed as replay_burn_in + model.max_seq_len "
          "(leave it -1).", _computed_sequence_length),
        K("prioritized_replay_eta", 0.9, "With prioritized_replay, a sequence's priority is eta * max + "
          "(1 - eta) * mean of its rows' absolute TD errors (R2D2's mix).", number_in(0, 1)),
    ]


def sequence_length(config: dict) -> int:
    """Rows per stored sequence: burn-in plus the trained rows."""
    return int(config["replay_burn_in"]) + int(config["model"]["max_seq_len"])


def sequences_per_batch(config: dict) -> int:
    """Sequences replayed per update: `train_batch_size` counts steps, as in RLlib 1.x's R2D2."""
    return max(1, config["train_batch_size"] // sequence_length(config))


def validate_sequence_replay(name: str, config: dict) -> None:
    """What sequence replay needs of the rest of the config (R2D2, RNNSAC, APEX_R2D2)."""
    if config["batch_mode"] != "complete_episodes":
        raise ValueError(f"{name} needs 'batch_mode': 'complete_episodes' (got {config['batch_mode']!r}): "
                         "replay sequences are cut from whole episodes")
    if config.get("compress_observations"):
        raise ValueError(f"'compress_observations': True is not available for {name} yet (replayed "
                         "sequences store their observations as arrays); set it False")


def policy_sequences(policy: Any, batch: SampleBatch, *, burn_in: int, n_step: int, gamma: float) -> SampleBatch:
    """The replay sequences (replay/sequences.py) of `policy`'s sampled rows: its `max_seq_len`,
    its recorded states and the view columns its model reads."""
    return replay_sequences(batch, max_seq_len=policy.max_seq_len, burn_in=burn_in, n_step=n_step, gamma=gamma,
                            num_states=policy.num_state_tensors(),
                            stream_columns=(SampleBatch.OBS, *policy.view_columns))


def replayed_sequence_steps(replayed: SampleBatch) -> int:
    """Agent steps replayed sequences hold (their rows with an action, burn-in included)."""
    return int(replayed[SampleBatch.SEQ_LENS].sum())


class SequenceReplayTrainer(OffPolicyTrainer):
    """`OffPolicyTrainer` whose buffers store sequences; its policy learns on them (see
    `algorithms/sequence_learning.py`) and records its memory's state while acting."""

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        validate_sequence_replay(self._name, config)

    def replay_items(self, policy_id: str, batch: SampleBatch, gamma: float) -> SampleBatch:
        return policy_sequences(self.get_policy(policy_id), batch, burn_in=self.config["replay_burn_in"],
                                n_step=self.config["n_step"], gamma=gamma)

    def replay_batch_items(self) -> int:
        return sequences_per_batch(self.config)

    def replayed_steps(self, replayed: SampleBatch) -> int:
        return replayed_sequence_steps(replayed)


__all__ = ["SequenceReplayTrainer", "policy_sequences", "replayed_sequence_steps", "sequence_length",
           "sequence_replay_keys", "sequences_per_batch", "validate_sequence_replay"]
