"""V-trace off-policy targets (Espeholt et al. 2018, "IMPALA", section 4.1), vectorised over
every trajectory of a train batch.

The batches a learner gets were sampled by workers whose weights lag behind the learner's
(the behaviour policy mu); V-trace corrects the value targets and policy-gradient
advantages for that lag with truncated importance weights rho = pi(a|x) / mu(a|x):

    delta_t = min(rho_bar, rho_t) * (r_t + gamma_t V(x_{t+1}) - V(x_t))
    vs_t    = V(x_t) + delta_t + gamma_t min(c_bar, rho_t) (vs_{t+1} - V(x_{t+1}))
    pg_adv_t = min(pg_rho_bar, rho_t) * (r_t + gamma_t vs_{t+1} - V(x_t))

where gamma_t is 0 after a terminal step, and at a trajectory's last row vs_{t+1} =
V(x_{t+1}) is the bootstrap value (the value of its final observation; 0 when terminal).
A batch is a run of contiguous trajectories (as in `rollout/postprocessing.py`); the
recursion runs backwards over all of them at once on a padded `[trajectories, max_len]`
array. The targets are constants for the loss (no gradient flows through them).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


def segment_ends(batch: SampleBatch) -> np.ndarray:
    """True at the last row of each contiguous trajectory: where `eps_id` changes, where the
    step index `t` does not go on by one (two fragments of one episode that are not
    consecutive, e.g. a replayed one), or at the batch's end."""
    eps = np.asarray(batch[SB.EPS_ID])
    n = len(eps)
    ends = np.ones(n, dtype=bool)
    if n > 1:
        ends[:-1] = eps[1:] != eps[:-1]
        if SB.T in batch:
            t = np.asarray(batch[SB.T])
            ends[:-1] |= t[1:] != t[:-1] + 1
    return ends


def _padded_positions(ends: np.ndarray) -> Tuple[np.ndarray, np.ndarray, int, int]:
    n = len(ends)
    seg = np.zeros(n, dtype=np.int64)
    seg[1:] = np.cumsum(ends[:-1])
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    pos = np.arange(n) - starts[seg]
    return seg, pos, len(starts), int(pos.max()) + 1


def vtrace(*, behaviour_logp: np.ndarray, target_logp: np.ndarray, rewards: np.ndarray, values: np.ndarray,
           bootstrap: np.ndarray, discounts: np.ndarray, ends: np.ndarray, clip_rho_threshold: float = 1.0,
           clip_pg_rho_threshold: float = 1.0, clip_c_threshold: float = 1.0) -> Tuple[np.ndarray, np.ndarray]:
    """V-trace value targets and policy-gradient advantages for one batch of trajectories.

    Args:
        behaviour_logp: log mu(a_t|x_t), recorded when sampling.
        target_logp: log pi(a_t|x_t) under the policy being learned.
        rewards: r_t.
        values: V(x_t) under the current value function.
        bootstrap: read at rows where `ends` is True only: V(x_{t+1}) of the trajectory's
            final observation (0 when it is terminal).
        discounts: gamma_t: gamma, or 0 where the step terminated the episode.
        ends: True at each trajectory's last row (`segment_ends`).
        clip_rho_threshold: rho_bar (None: no clipping).
        clip_pg_rho_threshold: the clip of rho in the advantages (None: no clipping).
        clip_c_threshold: c_bar, the trace-cutting clip.

    Returns:
        `(vs, pg_advantages)`, float32, one per row.
    """
    n = len(rewards)
    if n == 0:
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    rhos = np.exp(np.asarray(target_logp, np.float64) - np.asarray(behaviour_logp, np.float64))
    clipped_rhos = rhos if clip_rho_threshold is None else np.minimum(clip_rho_threshold, rhos)
    cs = np.minimum(clip_c_threshold, rhos)
    values = np.asarray(values, np.float64)
    rewards = np.asarray(rewards, np.float64)
    discounts = np.asarray(discounts, np.float64)
    next_values = np.empty(n, np.float64)
    next_values[:-1] = values[1:]
    next_values[ends] = np.asarray(bootstrap, np.float64)[ends]
    deltas = clipped_rhos * (rewards + discounts * next_values - values)

    # acc_t = delta_t + gamma_t c_t acc_{t+1}, restarting after each trajectory's end;
    # zero padding past an end keeps acc at 0 until a trajectory's last real row.
    seg, pos, num_seg, max_len = _padded_positions(ends)
    padded_delta = np.zeros((num_seg, max_len))
    padded_decay = np.zeros((num_seg, max_len))
    padded_delta[seg, pos] = deltas
    padded_decay[seg, pos] = discounts * cs
    acc = np.zeros(num_seg)
    out = np.zeros((num_seg, max_len))
    for k in range(max_len - 1, -1, -1):
        acc = padded_delta[:, k] + padded_decay[:, k] * acc
        out[:, k] = acc
    vs = values + out[seg, pos]

    next_vs = np.empty(n, np.float64)
    next_vs[:-1] = vs[1:]
    next_vs[ends] = next_values[ends]
    pg_rhos = rhos if clip_pg_rho_threshold is None else np.minimum(clip_pg_rho_threshold, rhos)
    pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return vs.astype(np.float32), pg_advantages.astype(np.float32)


__all__ = ["segment_ends", "vtrace"]
