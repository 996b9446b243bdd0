"""Vectorised returns and advantages over batches that hold many trajectories.

A batch is a run of contiguous trajectories (the sampler's env-major layout). A
trajectory ends where `eps_id` changes or the batch ends. Recursions such as GAE run
backwards over all trajectories at once: rows are scattered into a padded
`[num_trajectories, max_len]` array and scanned column by column.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


def trajectory_ends(eps_id: np.ndarray) -> np.ndarray:
    """True at the last row of each trajectory (eps_id changes next, or the batch ends)."""
    ends = np.ones(len(eps_id), dtype=bool)
    if len(eps_id) > 1:
        ends[:-1] = eps_id[1:] != eps_id[:-1]
    return ends


def segmented_discounted_cumsum(x: np.ndarray, discount: float, ends: np.ndarray) -> np.ndarray:
    """y[t] = x[t] + discount * y[t+1], restarting after every row where `ends` is True."""
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    seg = np.zeros(n, dtype=np.int64)
    seg[1:] = np.cumsum(ends[:-1])
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    pos = np.arange(n) - starts[seg]
    padded = np.zeros((len(starts), int(pos.max()) + 1), dtype=np.float64)
    padded[seg, pos] = x
    acc = np.zeros(len(starts), dtype=np.float64)
    # Zero padding past a trajectory's end keeps `acc` at 0 until its last real row.
    for k in range(padded.shape[1] - 1, -1, -1):
        acc = padded[:, k] + discount * acc
        padded[:, k] = acc
    return padded[seg, pos].astype(np.float32)


_GAE_NEEDS_CRITIC = "GAE is built on the value function"


def check_gae_needs_critic(config: dict) -> None:
    """The config rule of every algorithm with `use_gae` and `use_critic` keys (PPO, A2C,
    A3C, DD-PPO): GAE needs the critic."""
    if config["use_gae"] and not config["use_critic"]:
        raise ValueError(f"'use_gae': True needs 'use_critic': True ({_GAE_NEEDS_CRITIC}); set 'use_gae': False "
                         "for discounted returns without a critic")


def compute_advantages(
    batch: SampleBatch,
    bootstrap: np.ndarray,
    gamma: float = 0.9,
    lambda_: float = 1.0,
    use_gae: bool = True,
    use_critic: bool = True,
) -> SampleBatch:
    """Adds `advantages` and `value_targets` columns (the semantics of RLlib 1.x's
    `compute_advantages`, `rllib/evaluation/postprocessing.py`).

    Args:
        batch: contiguous trajectories with `rewards`, `eps_id` (and `vf_preds` when a
            critic is used).
        bootstrap: one value per row, read only at trajectory ends: the value to
            bootstrap from there (0 for terminal rows).
        gamma: discount factor.
        lambda_: the GAE parameter.
        use_gae: generalised advantage estimation (needs a critic).
        use_critic: subtract the value baseline when not using GAE.
    """
    rewards = batch[SB.REWARDS].astype(np.float64)
    ends = trajectory_ends(batch[SB.EPS_ID])
    if use_gae:
        if not use_critic:
            raise ValueError(f"use_gae=True needs use_critic=True ({_GAE_NEEDS_CRITIC})")
        vf = batch[SB.VF_PREDS].astype(np.float64)
        next_v = np.empty_like(vf)
        next_v[:-1] = vf[1:]
        next_v[ends] = bootstrap[ends]
        deltas = rewards + gamma * next_v - vf
        adv = segmented_discounted_cumsum(deltas, gamma * lambda_, ends)
        batch[SB.ADVANTAGES] = adv
        batch[SB.VALUE_TARGETS] = (adv + vf).astype(np.float32)
    else:
        rewards_plus = rewards.copy()
        rewards_plus[ends] += gamma * bootstrap[ends]
        returns = segmented_discounted_cumsum(rewards_plus, gamma, ends)
        if use_critic:
            batch[SB.ADVANTAGES] = returns - batch[SB.VF_PREDS].astype(np.float32)
            batch[SB.VALUE_TARGETS] = returns
        else:
            batch[SB.ADVANTAGES] = returns
            batch[SB.VALUE_TARGETS] = np.zeros_like(returns)
    return batch


def bootstrap_values(policy, batch: SampleBatch) -> np.ndarray:
    """Per-row bootstrap values: V(next obs) at trajectory ends that are not terminal.

    One batched forward pass over just the rows that need it.
    """
    ends = trajectory_ends(batch[SB.EPS_ID])
    terminal = batch[SB.TERMINATEDS] if SB.TERMINATEDS in batch else np.zeros(batch.count, bool)
    need = ends & ~terminal
    out = np.zeros(batch.count, dtype=np.float32)
    if need.any():
        if policy.is_recurrent():
            # V(next obs) given the state after the last step, whose action and reward are
            # the "previous" ones for the next observation.
            states = [batch[f"state_out_{k}"][need] for k in range(policy.num_state_tensors())]
            out[need] = policy.compute_values(batch[SB.NEXT_OBS][need], states, batch[SB.ACTIONS][need],
                                              batch[SB.REWARDS][need])
        else:
            out[need] = policy.compute_values(batch[SB.NEXT_OBS][need])
    return out


def standardized(x: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """(x - mean) / std, as RLlib 1.x standardises advantages per train batch."""
    return ((x - x.mean()) / max(float(x.std()), eps)).astype(np.float32)


def postprocess_for_learning(policy, batch: SampleBatch, other_agent_batches: Optional[dict] = None,
                             episode=None) -> SampleBatch:
    """What every sampler runs on collected trajectories: the exploration's postprocessing
    first (Curiosity adds its intrinsic reward, which advantages and n-step returns must then
    include; the others return the batch as it is), then the policy's `postprocess_trajectory`."""
    batch = policy.exploration.postprocess_trajectory(policy, batch)
    return policy.postprocess_trajectory(batch, other_agent_batches, episode)


def drop_state_outs(batch: SampleBatch) -> SampleBatch:
    """`batch` without its `state_out_<k>` columns (a recurrent policy's): they served
    bootstrapping only; learning needs `state_in_<k>` alone."""
    for key in [k for k in batch if k.startswith("state_out_")]:
        del batch[key]
    return batch


def postprocess_with_critic(policy, batch: SampleBatch, gamma: float, lambda_: float, use_gae: bool,
                            use_critic: bool, other: Optional[dict] = None) -> SampleBatch:
    """GAE / returns for a critic-based policy, bootstrapping truncated trajectories."""
    bootstrap = bootstrap_values(policy, batch) if use_critic else np.zeros(batch.count, np.float32)
    return compute_advantages(batch, bootstrap, gamma, lambda_, use_gae, use_critic)
