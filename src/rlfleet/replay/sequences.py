"""Sequence replay for recurrent off-policy learning (R2D2, Kapturowski et al. 2019).

A recurrent learner replays sequences, not transitions: `replay_sequences` cuts each sampled
trajectory into sequences, and each sequence is ONE row of an ordinary `ReplayBuffer` /
`PrioritizedReplayBuffer` (whose rows may have any shape), so capacity, sampling, priorities,
checkpoints and replay shards work unchanged, counted in sequences.

Layout (B = `burn_in`, m = `max_seq_len`, n = `n_step`). A trajectory of N rows is trained
in windows of m rows, `[k*m, (k+1)*m)`; the sequence of window k also holds the B rows
before it (fewer at the trajectory's start), so consecutive sequences overlap by B rows,
the paper's overlap. Per sequence:

| column | shape | meaning |
| --- | --- | --- |
| `obs` (and `prev_actions`, `prev_rewards` when recorded) | `[B + m + n, ...]` | the observations from the sequence's first row on, through the last one a target bootstraps from (the trajectory's final `new_obs` included); zero padding after |
| `actions`, `rewards`, `terminateds`, `n_steps` | `[B + m]` | per row: the action, the n-step return, whether the episode terminated within its n steps, and those steps' count (`n_step.py`) |
| `state_in_<k>` | `[...]` | the recurrent state going into the sequence's first row, as recorded while acting |
| `seq_lens` | `[]` | rows with an action (the rest is padding) |
| `seq_loss_start` | `[]` | burn-in rows: rows before it only warm the recurrent state and carry no loss |

The target of row t bootstraps from `obs[t + n_steps[t]]`, always inside the stored
observations. Priorities of sequences mix the absolute TD errors of their loss rows as in
the paper: `eta * max + (1 - eta) * mean` (`sequence_priorities`).
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay.n_step import N_STEPS, n_step_transitions, trajectory_end_rows

SB = SampleBatch

# Burn-in rows at the start of each stored sequence.
SEQ_LOSS_START = "seq_loss_start"

# Columns stored per step, and per observation (each with the column that supplies the
# entry after the trajectory's last row: its final observation, action, reward).
STEP_COLUMNS = (SB.ACTIONS, SB.REWARDS, SB.TERMINATEDS, N_STEPS)
OBS_STREAM_TAILS: Dict[str, str] = {SB.OBS: SB.NEXT_OBS, SB.PREV_ACTIONS: SB.ACTIONS, SB.PREV_REWARDS: SB.REWARDS}


def replay_sequences(batch: SampleBatch, *, max_seq_len: int, burn_in: int, n_step: int, gamma: float,
                     num_states: int, stream_columns: Sequence[str] = (SB.OBS,)) -> SampleBatch:
    """The replay sequences of a batch of contiguous trajectories (the module's layout).

    Args:
        batch: env-major rows with `obs`, `new_obs`, `actions`, `rewards`, `terminateds`,
            `eps_id`, the `state_in_<k>` going into each row and the `stream_columns`.
        max_seq_len: rows trained per sequence (m).
        burn_in: rows before them that only warm the recurrent state (B).
        n_step: the n of the n-step returns.
        gamma: the discount factor.
        num_states: how many `state_in_<k>` columns the policy records.
        stream_columns: the per-observation columns the model reads (`obs`, and
            `prev_actions` / `prev_rewards` when it feeds them back).

    Returns:
        One row per sequence.
    """
    if max_seq_len < 1 or burn_in < 0:
        raise ValueError(f"replay sequences need max_seq_len >= 1 and burn_in >= 0, got {max_seq_len}, {burn_in}")
    states = [f"state_in_{k}" for k in range(num_states)]
    missing = [c for c in (*states, *stream_columns, *(OBS_STREAM_TAILS[c] for c in stream_columns)) if c not in batch]
    if missing:
        raise ValueError(f"sequence replay needs the batch columns {missing}; got {sorted(batch.keys())}")
    steps = n_step_transitions(batch, n_step, gamma, columns=STEP_COLUMNS)
    ends = np.flatnonzero(trajectory_end_rows(batch)) + 1
    starts = np.concatenate(([0], ends[:-1]))
    # (first row, first trained row, end row, end of the stored observations) per sequence,
    # as batch row indexes; observation index `end` stands for the trajectory's final new_obs.
    spans = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        for window in range(a, b, max_seq_len):
            stop = min(window + max_seq_len, b)
            spans.append((max(a, window - burn_in), window, stop, min(stop - 1 + n_step, b), b))
    rows, obs_rows = burn_in + max_seq_len, burn_in + max_seq_len + n_step
    out: Dict[str, np.ndarray] = {}
    for col in STEP_COLUMNS:
        out[col] = _padded(steps[col], [(first, stop) for first, _, stop, _, _ in spans], rows)
    for col in stream_columns:
        stream = batch[col]
        tail = np.asarray(batch[OBS_STREAM_TAILS[col]]).astype(stream.dtype, copy=False)
        pieces = []
        for first, _, _, obs_end, traj_end in spans:
            # Rows first .. obs_end - 1 from the column, obs_end from the tail where it is the trajectory's end.
            piece = stream[first:min(obs_end + 1, traj_end)]
            if obs_end == traj_end:
                piece = np.concatenate([piece, tail[traj_end - 1:traj_end]])
            pieces.append(piece)
        out[col] = _stack_padded(pieces, obs_rows, stream)
    first_rows = np.array([s[0] for s in spans], dtype=np.int64)
    for col in states:
        out[col] = np.asarray(batch[col])[first_rows]
    out[SB.SEQ_LENS] = np.array([stop - first for first, _, stop, _, _ in spans], dtype=np.int32)
    out[SEQ_LOSS_START] = np.array([window - first for first, window, _, _, _ in spans], dtype=np.int32)
    return SampleBatch(out)


def _padded(column: np.ndarray, ranges, length: int) -> np.ndarray:
    return _stack_padded([column[a:b] for a, b in ranges], length, column)


def _stack_padded(pieces, length: int, like: np.ndarray) -> np.ndarray:
    out = np.zeros((len(pieces), length, *like.shape[1:]), dtype=like.dtype)
    for i, piece in enumerate(pieces):
        out[i, :len(piece)] = piece
    return out


def loss_mask(seq_lens: np.ndarray, loss_start: np.ndarray, length: int) -> np.ndarray:
    """`[S, length]` True on each sequence's trained rows: past its burn-in, before its padding."""
    t = np.arange(length)[None, :]
    return (t >= np.asarray(loss_start)[:, None]) & (t < np.asarray(seq_lens)[:, None])


def sequence_priorities(abs_td_errors: np.ndarray, mask: np.ndarray, eta: float) -> np.ndarray:
    """R2D2's priority of each sequence: `eta * max + (1 - eta) * mean` of the absolute TD
    errors over its trained rows (`mask`); 0 for a sequence without one.

    Args:
        abs_td_errors: `[S, T]` absolute TD errors.
        mask: `[S, T]` the trained rows.
        eta: weight of the maximum (the paper's 0.9).
    """
    mask = np.asarray(mask, bool)
    errors = np.where(mask, np.abs(abs_td_errors), 0.0)
    count = mask.sum(axis=1)
    mean = errors.sum(axis=1) / np.maximum(count, 1)
    return eta * errors.max(axis=1, initial=0.0) + (1.0 - eta) * mean


__all__ = ["OBS_STREAM_TAILS", "SEQ_LOSS_START", "STEP_COLUMNS", "loss_mask", "replay_sequences",
           "sequence_priorities"]
