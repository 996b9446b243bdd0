"""n-step transitions, computed for a whole sampled fragment at once.

Row t of a trajectory becomes the transition
    (obs[t], actions[t], sum_{i<k} gamma^i * rewards[t+i], new_obs[t+k-1], terminateds[t+k-1])
with k = min(n, rows left in its trajectory). The learner bootstraps with
`gamma ** n_steps[t] * (1 - terminateds[t]) * Q(new_obs[t])`, so
- an episode that ended by `terminated` inside the window never bootstraps;
- one that ended by `truncated` (time limit, horizon) bootstraps from its final observation;
- near the end of a fragment whose episode goes on, the window is shorter (k < n) and the
  discount is gamma^k, not gamma^n: the target stays exact instead of over-discounting.
"""
from __future__ import annotations

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import trajectory_ends

SB = SampleBatch

# Column with the number of env steps each (possibly shortened) n-step transition spans.
N_STEPS = "n_steps"

# The columns the off-policy learners read; everything else is dropped before storage.
TRANSITION_COLUMNS = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS)


def trajectory_end_rows(batch: SampleBatch) -> np.ndarray:
    """True at the last row of each trajectory: where `eps_id` or `agent_index` changes next,
    at a `dones` row, and at the end of the batch."""
    ends = trajectory_ends(batch[SB.EPS_ID])
    if SB.DONES in batch:
        ends = ends | batch[SB.DONES].astype(bool)
    if SB.AGENT_INDEX in batch and batch.count:  # one policy's rows may hold several agents of an episode
        agents = batch[SB.AGENT_INDEX]
        ends = ends | np.append(agents[1:] != agents[:-1], True)
    return ends


def n_step_transitions(batch: SampleBatch, n_step: int, gamma: float,
                       columns=TRANSITION_COLUMNS) -> SampleBatch:
    """The n-step transitions of a batch of contiguous trajectories.

    Args:
        batch: env-major rows with `obs`, `actions`, `rewards`, `new_obs`, `terminateds`,
            `eps_id` (and optionally `dones`, `agent_index`); a trajectory ends where
            `eps_id` or `agent_index` changes, at a `dones` row, or at the end of the batch.
        n_step: the lookahead n (>= 1).
        gamma: the discount factor.
        columns: the columns of the result.

    Returns:
        A new SampleBatch with one transition per row of `batch`.
    """
    if n_step < 1:
        raise ValueError(f"'n_step': {n_step!r} must be an int >= 1")
    count = batch.count
    ends = trajectory_end_rows(batch)
    # Index of the last row of each row's trajectory: a reverse running minimum over the
    # positions of trajectory ends.
    end_pos = np.where(ends, np.arange(count), count)
    last = np.minimum.accumulate(end_pos[::-1])[::-1]
    rows = np.arange(count)
    k = np.minimum(n_step, last - rows + 1).astype(np.int64)

    rewards = batch[SB.REWARDS].astype(np.float64)
    ret = np.zeros(count, dtype=np.float64)
    for i in range(n_step):
        within = i < k
        ret += np.where(within, gamma ** i * rewards[np.minimum(rows + i, count - 1)], 0.0)
    tail = rows + k - 1

    out = {}
    for col in columns:
        if col == N_STEPS:
            out[col] = k
        elif col == SB.REWARDS:
            out[col] = ret.astype(np.float32)
        elif col in (SB.NEXT_OBS, SB.TERMINATEDS, SB.TRUNCATEDS, SB.DONES):
            out[col] = batch[col][tail]
        else:
            out[col] = batch[col]
    return SampleBatch(out)
