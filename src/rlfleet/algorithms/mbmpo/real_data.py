"""Real experience for MB-MPO: sampled on the rollout workers by the meta-policy adapted to
one ensemble member each (Clavera et al. 2018, arXiv 1809.05214, Algorithm 1, line 4), and
kept as flat `(obs, action, next_obs)` arrays (actions as the env received them) that the
dynamics ensemble is refitted on."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from rlfleet.utils.spaces import env_actions

SB = SampleBatch
Weights = Dict[str, np.ndarray]


def sample_adapted(worker, weights: Optional[Weights], seed: Optional[int]) -> SampleBatch:
    """One `sample()` of `worker` with `weights` (None: its own, the meta weights), from fresh
    episodes (every episode of the batch runs one policy); the worker's policy has its own
    weights back afterwards. The fresh episodes' resets are seeded from `seed` (and the
    worker's index; None: unseeded), so a run resumed from a checkpoint samples the same. Episodes still in flight are dropped by the next call's restart,
    not here: a restart also drops the finished episodes' metrics, which the trainer has
    not collected yet."""
    policy = worker.get_policy(DEFAULT_POLICY_ID)
    own = policy.get_weights()
    worker.restart_episodes(seed)
    try:
        if weights is not None:
            policy.set_weights(dict(own, **weights))
        return worker.sample().as_multi_agent().policy_batches[DEFAULT_POLICY_ID]
    finally:
        if weights is not None:
            policy.set_weights(own)


class TransitionStore:
    """Every real transition so far, growing by whole batches.

    Args:
        action_space: the env's action space (the policy's actions are mapped into it).
        normalize_actions, clip_actions: the config's mapping of policy actions to env actions.
    """

    COLUMNS = ("obs", "actions", "new_obs")

    def __init__(self, action_space, normalize_actions: bool, clip_actions: bool):
        self.action_space, self.normalize, self.clip = action_space, bool(normalize_actions), bool(clip_actions)
        self.parts: Dict[str, List[np.ndarray]] = {c: [] for c in self.COLUMNS}

    def add(self, batch: SampleBatch) -> None:
        n = batch.count
        actions = env_actions(np.asarray(batch[SB.ACTIONS]), self.action_space, self.normalize, self.clip)
        self.parts["obs"].append(np.asarray(batch[SB.OBS], np.float32).reshape(n, -1))
        self.parts["actions"].append(np.asarray(actions, np.float32).reshape(n, -1))
        self.parts["new_obs"].append(np.asarray(batch[SB.NEXT_OBS], np.float32).reshape(n, -1))

    def __len__(self) -> int:
        return int(sum(len(p) for p in self.parts["obs"]))

    def arrays(self) -> Dict[str, np.ndarray]:
        """The transitions as one array per column (merged in place, so later calls are cheap)."""
        for c in self.COLUMNS:
            if len(self.parts[c]) > 1:
                self.parts[c] = [np.concatenate(self.parts[c])]
        return {c: (self.parts[c][0] if self.parts[c] else np.zeros((0, 0), np.float32)) for c in self.COLUMNS}

    def get_state(self) -> Dict[str, np.ndarray]:
        return self.arrays() if len(self) else {}

    def set_state(self, state: Dict[str, np.ndarray]) -> None:
        self.parts = {c: ([np.asarray(state[c], np.float32)] if state else []) for c in self.COLUMNS}


__all__ = ["TransitionStore", "sample_adapted"]
