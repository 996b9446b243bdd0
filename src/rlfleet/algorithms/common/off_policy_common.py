"""Helpers the off-policy algorithms (SAC, DDPG / TD3, DQN, CQL) share, so none of them
imports a sibling."""
from __future__ import annotations

import contextlib
from typing import Dict, Tuple

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS

SB = SampleBatch


@contextlib.contextmanager
def frozen(params):
    """Parameters excluded from autograd for the ops recorded inside the block."""
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)


def replay_columns(columns: Dict[str, np.ndarray], gamma: float) -> Tuple[np.ndarray, ...]:
    """`(obs, next_obs, actions, rewards, discounts, weights)` of a replayed batch, float32
    and flat per row; the discount is gamma ** n_steps, 0 past a terminal step (as
    `sac_losses` and `ddpg_losses` compute it)."""
    f32 = np.float32
    n = len(columns[SB.REWARDS])
    obs, next_obs, actions = (columns[k].reshape(n, -1).astype(f32, copy=False)
                              for k in (SB.OBS, SB.NEXT_OBS, SB.ACTIONS))
    discounts = (f32(gamma) ** columns[N_STEPS].astype(f32)) * (1.0 - columns[SB.TERMINATEDS].astype(f32))
    return (obs, next_obs, actions, columns[SB.REWARDS].astype(f32, copy=False), discounts,
            columns[PRIO_WEIGHTS].astype(f32, copy=False))


__all__ = ["frozen", "replay_columns"]
