"""Checks and normalizes what an input reader read: required columns, the policy's spaces,
Box actions to the policy's normalized space.

Shared by every reader (`readers.JsonReader`, `minari_input.MinariReader`); apart from
`readers.py` because that module also builds the Minari reader for `input: "minari:<id>"`.
"""
from __future__ import annotations

from typing import Optional, Union

import gymnasium as gym
import numpy as np

from rlfleet.offline.io_context import IOContext
from rlfleet.offline.json_format import OfflineDataError
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from rlfleet.utils.spaces import action_layout, is_bounded_box

SB = SampleBatch
Batch = Union[SampleBatch, MultiAgentBatch]


def _require_columns(batch: SampleBatch, path: str, line: Optional[int], where: str) -> SampleBatch:
    missing = [c for c in (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.EPS_ID) if c not in batch]
    if SB.TERMINATEDS not in batch and SB.DONES not in batch:
        missing.append("terminateds (or dones)")
    if missing:
        raise OfflineDataError(path, line, f"{where} lacks the required column(s) {missing}; it has "
                                           f"{sorted(batch.keys())}")
    if SB.TERMINATEDS not in batch:  # older data: `dones` only (taken as terminal)
        batch[SB.TERMINATEDS] = batch[SB.DONES].astype(bool)
    if SB.TRUNCATEDS not in batch:
        batch[SB.TRUNCATEDS] = (batch[SB.DONES].astype(bool) & ~batch[SB.TERMINATEDS].astype(bool)
                                if SB.DONES in batch else np.zeros(batch.count, bool))
    if SB.DONES not in batch:
        batch[SB.DONES] = batch[SB.TERMINATEDS].astype(bool) | batch[SB.TRUNCATEDS].astype(bool)
    if SB.T not in batch:
        batch[SB.T] = _steps_within_episodes(batch[SB.EPS_ID])
    return batch


def _steps_within_episodes(eps_id: np.ndarray) -> np.ndarray:
    n = len(eps_id)
    starts = np.ones(n, bool)
    starts[1:] = eps_id[1:] != eps_id[:-1]
    idx = np.arange(n)
    return idx - np.maximum.accumulate(np.where(starts, idx, 0))


def _check_fits(batch: SampleBatch, policy, config: dict, normalized: bool, path: str, line: Optional[int],
                where: str) -> None:
    obs_space, act_space = policy.observation_space, policy.action_space
    obs = batch[SB.OBS]
    if isinstance(obs_space, gym.spaces.Box) and obs.ndim >= 1:
        if tuple(obs.shape[1:]) != tuple(obs_space.shape):
            raise OfflineDataError(path, line, f"{where}: observations have shape {tuple(obs.shape[1:])}, the "
                                               f"policy's observation space {obs_space} needs {obs_space.shape}")
        if config.get("observation_filter", "NoFilter") == "NoFilter" and obs.dtype.kind in "biuf":
            bad = ~((obs >= obs_space.low - 1e-5) & (obs <= obs_space.high + 1e-5))
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise OfflineDataError(path, line, f"{where}: observation of row {row} {obs[row].tolist()} is "
                                                   f"outside the observation space {obs_space}")
    actions = batch[SB.ACTIONS]
    row_shape, _ = action_layout(act_space)
    if tuple(actions.shape[1:]) != tuple(row_shape):
        raise OfflineDataError(path, line, f"{where}: actions have row shape {tuple(actions.shape[1:])}, the action "
                                           f"space {act_space} needs {tuple(row_shape)}")
    if isinstance(act_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        if actions.dtype.kind == "f" and not np.all(np.mod(actions, 1) == 0):
            raise OfflineDataError(path, line, f"{where}: actions must be integers for the action space {act_space}")
        if isinstance(act_space, gym.spaces.Discrete):
            high = np.full(1, act_space.n)
        elif isinstance(act_space, gym.spaces.MultiDiscrete):
            high = np.asarray(act_space.nvec).ravel()
        else:
            high = np.full(1, 2)
        bad = (actions < 0) | (actions >= high)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise OfflineDataError(path, line, f"{where}: action of row {row} ({actions[row].tolist()}) is outside the "
                                               f"action space {act_space}")
    elif isinstance(act_space, gym.spaces.Box) and not normalized:
        low, high = act_space.low.ravel(), act_space.high.ravel()
        bad = ~((actions >= low - 1e-5) & (actions <= high + 1e-5))
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise OfflineDataError(
                path, line, f"{where}: action of row {row} ({actions[row].tolist()}) is outside the action space "
                            f"{act_space}; if the file holds normalized actions, set 'actions_in_input_normalized': True")


def _normalize_actions(batch: SampleBatch, space: gym.Space) -> None:
    """Env-space Box actions -> the policy's normalized [-1, 1] space (inverse of unsquash)."""
    if is_bounded_box(space):
        low, high = space.low.ravel(), space.high.ravel()
        batch[SB.ACTIONS] = (2.0 * (batch[SB.ACTIONS] - low) / (high - low) - 1.0).astype(np.float32)


def prepare_policy_batch(batch: SampleBatch, policy, config: dict, normalized: Optional[bool], path: str,
                         line: Optional[int], where: str = "the batch") -> SampleBatch:
    """Checks one policy's batch (columns, spaces) and normalizes its Box actions when they
    are in the env's space; fills `terminateds` / `truncateds` / `dones` / `t` from the others."""
    batch = _require_columns(batch, path, line, where)
    if normalized is None:
        normalized = bool(config.get("actions_in_input_normalized", False))
    if policy is not None:
        _check_fits(batch, policy, config, normalized, path, line, where)
        if (not normalized and config.get("normalize_actions", True)
                and isinstance(policy.action_space, gym.spaces.Box)):
            _normalize_actions(batch, policy.action_space)
    return batch


def prepare_batch(batch: Batch, normalized: Optional[bool], ioctx: IOContext, path: str,
                  line: Optional[int]) -> Batch:
    """`prepare_policy_batch` for every policy's part of `batch`, with the worker's policies."""
    worker = ioctx.worker
    policy_map = worker.policy_map if worker is not None else None
    config = ioctx.config
    if isinstance(batch, MultiAgentBatch):
        out = {}
        for pid, b in batch.policy_batches.items():
            if policy_map is not None and pid not in policy_map:
                raise OfflineDataError(path, line, f"holds samples of policy {pid!r}, which this trainer does not have "
                                                   f"(its policies: {sorted(policy_map)})")
            policy = policy_map[pid] if policy_map is not None else None
            out[pid] = prepare_policy_batch(b, policy, config, normalized, path, line, f"policy {pid!r}")
        return MultiAgentBatch(out, batch.count)
    policy = None
    if policy_map is not None:
        if DEFAULT_POLICY_ID in policy_map:
            policy = policy_map[DEFAULT_POLICY_ID]
        elif len(policy_map) == 1:
            policy = next(iter(policy_map.values()))
        else:
            raise OfflineDataError(path, line, "holds a single-agent batch, but this trainer has several policies "
                                               f"{sorted(policy_map)} and none is {DEFAULT_POLICY_ID!r}")
    return prepare_policy_batch(batch, policy, config, normalized, path, line)
