"""Sequences for recurrent learning: chop trajectories into `max_seq_len` chunks and pad them.

The sampler records, for a recurrent policy, the model state going into every step
(`state_in_0..k`, one row per step) next to `prev_actions` / `prev_rewards`. Learning
needs those only at sequence starts: `chop_into_sequences` cuts each trajectory (a run
of rows with one `eps_id`, `env_id` and, in multi-agent batches, `agent_index`) into chunks of at most `max_seq_len` rows, pads every
chunk to the same length T, and keeps the state of each chunk's first row.

Padded rows are zeros; `seq_mask` marks the real ones, and losses average over those only.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
SEQ_MASK = "seq_mask"


def state_columns(num_states: int, prefix: str = "state_in_") -> List[str]:
    return [f"{prefix}{i}" for i in range(num_states)]


def sequence_starts(episode_ids: np.ndarray, max_seq_len: int, env_ids: Optional[np.ndarray] = None,
                    agent_ids: Optional[np.ndarray] = None) -> np.ndarray:
    """True at the rows where a new sequence begins (trajectory starts, then every
    `max_seq_len` rows into a trajectory)."""
    n = len(episode_ids)
    if n == 0:
        return np.zeros(0, bool)
    new_traj = np.ones(n, bool)
    new_traj[1:] = episode_ids[1:] != episode_ids[:-1]
    for ids in (env_ids, agent_ids):
        if ids is not None:
            new_traj[1:] |= ids[1:] != ids[:-1]
    traj_start = np.flatnonzero(new_traj)
    traj_id = np.cumsum(new_traj) - 1
    pos = np.arange(n) - traj_start[traj_id]
    return new_traj | (pos % int(max_seq_len) == 0)


def chop_into_sequences(
    *,
    episode_ids: np.ndarray,
    feature_columns: Sequence[np.ndarray],
    state_columns: Sequence[np.ndarray],
    max_seq_len: int,
    env_ids: Optional[np.ndarray] = None,
    agent_ids: Optional[np.ndarray] = None,
    dynamic_max: bool = True,
) -> Tuple[List[np.ndarray], List[np.ndarray], np.ndarray]:
    """Cuts rows into padded sequences (RLlib 1.x's `chop_into_sequences`, `rllib/policy/rnn_sequencing.py`).

    Args:
        episode_ids: `[N]` episode id per row; a change starts a new trajectory.
        feature_columns: `[N, ...]` arrays to pad.
        state_columns: `[N, ...]` recurrent state going into each row.
        max_seq_len: longest sequence.
        env_ids: `[N]` optional; a change also starts a new trajectory.
        agent_ids: `[N]` optional (multi-agent batches: two agents of one policy share an
            episode and env); a change also starts a new trajectory.
        dynamic_max: pad to the longest sequence present (else to `max_seq_len`).

    Returns:
        `(padded features [S * T, ...] each, initial states [S, ...] each, seq_lens [S])`,
        sequence-major: sequence s occupies rows `s*T .. s*T + seq_lens[s] - 1`.

    Example: episode ids `[1, 1, 1, 5, 5, 2]` with max_seq_len 2 give seq_lens
    `[2, 1, 2, 1]` and features padded as `[a, b, c, 0, d, e, f, 0]`.
    """
    episode_ids = np.asarray(episode_ids)
    starts_mask = sequence_starts(episode_ids, max_seq_len, env_ids, agent_ids)
    starts = np.flatnonzero(starts_mask)
    n = len(episode_ids)
    seq_lens = np.diff(np.append(starts, n)).astype(np.int32)
    t_max = int(seq_lens.max()) if dynamic_max and len(seq_lens) else int(max_seq_len)
    seq_id = np.cumsum(starts_mask) - 1
    dest = seq_id * t_max + (np.arange(n) - starts[seq_id])
    padded = []
    for col in feature_columns:
        col = np.asarray(col)
        out = np.zeros((len(starts) * t_max, *col.shape[1:]), col.dtype)
        out[dest] = col
        padded.append(out)
    initial = [np.asarray(s)[starts] for s in state_columns]
    return padded, initial, seq_lens


def pad_batch_to_sequences(batch: SampleBatch, max_seq_len: int, columns: Sequence[str], num_states: int
                           ) -> Dict[str, np.ndarray]:
    """The learning view of a recurrent batch: `columns` as `[S, T, ...]`, `state_in_k` as
    `[S, ...]`, `seq_lens` `[S]` and `seq_mask` `[S, T]` (True on real rows)."""
    states = state_columns(num_states)
    missing = [c for c in states if c not in batch]
    if missing:
        raise ValueError(f"A recurrent policy needs the state columns {missing}; got {sorted(batch.keys())}")
    env_ids = batch[SB.ENV_ID] if SB.ENV_ID in batch else None
    agent_ids = batch[SB.AGENT_INDEX] if SB.AGENT_INDEX in batch else None
    feats, init, seq_lens = chop_into_sequences(
        episode_ids=batch[SB.EPS_ID], feature_columns=[batch[c] for c in columns],
        state_columns=[batch[c] for c in states], max_seq_len=max_seq_len, env_ids=env_ids, agent_ids=agent_ids,
    )
    s = len(seq_lens)
    t = len(feats[0]) // s if s else 0
    out = {c: f.reshape(s, t, *f.shape[1:]) for c, f in zip(columns, feats)}
    out.update(zip(states, init))
    out[SB.SEQ_LENS] = seq_lens
    out[SEQ_MASK] = np.arange(t)[None, :] < seq_lens[:, None]
    return out


__all__ = ["chop_into_sequences", "pad_batch_to_sequences", "sequence_starts", "state_columns", "SEQ_MASK"]
