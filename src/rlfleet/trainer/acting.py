"""Actions for raw env observations outside sampling (`Trainer.compute_single_action` /
`compute_actions`): the worker's preprocessor and filter (never updated), then the policy,
then the actions as the env takes them."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.utils.spaces import env_actions, flatten_action


def _policy_of(worker, policy_id: str):
    if policy_id not in worker.policy_map:
        raise KeyError(f"No policy {policy_id!r}; known: {sorted(worker.policy_map)}")
    return worker.policy_map[policy_id]


def compute_single_action(worker, observation, state: Optional[List[Any]] = None, prev_action=None,
                          prev_reward: Optional[float] = None, info: Optional[dict] = None,
                          policy_id: str = DEFAULT_POLICY_ID, full_fetch: bool = False,
                          explore: Optional[bool] = None, unsquash_actions: Optional[bool] = None,
                          clip_actions: Optional[bool] = None):
    """`Trainer.compute_single_action` on `worker` (its policies, preprocessors and filters)."""
    policy = _policy_of(worker, policy_id)
    pp = worker.preprocessors[policy_id]
    pp.check(observation)
    filtered = worker.filters[policy_id](pp.transform(observation), update=False)
    result = policy.compute_single_action(filtered, state or [], prev_action, prev_reward, info, explore=explore,
                                          unsquash_actions=unsquash_actions, clip_actions=clip_actions)
    return result if (state or full_fetch) else result[0]


def compute_actions(worker, config: dict, observations: Dict[Any, Any],
                    state: Optional[Dict[Any, List[Any]]] = None, prev_action=None, prev_reward=None, info=None,
                    policy_id: str = DEFAULT_POLICY_ID, full_fetch: bool = False, explore: Optional[bool] = None,
                    normalize_actions: Optional[bool] = None, clip_actions: Optional[bool] = None):
    """`Trainer.compute_actions` on `worker`: one batched forward pass for `{key: raw obs}`;
    `config` gives the default `normalize_actions` / `clip_actions`."""
    policy = _policy_of(worker, policy_id)
    pp, filt = worker.preprocessors[policy_id], worker.filters[policy_id]
    keys = list(observations)
    obs_batch = np.stack([filt(pp.transform(observations[k]), update=False) for k in keys])
    state_batches: List[np.ndarray] = []
    if state is not None:
        per_key = [state.get(k, policy.get_initial_state()) for k in keys]
        state_batches = [np.stack(s) for s in zip(*per_key)]
    if isinstance(prev_action, dict):  # {key: action}, as the observations
        prev_action = np.stack([flatten_action(prev_action[k], policy.action_space) for k in keys])
    if isinstance(prev_reward, dict):
        prev_reward = np.asarray([prev_reward[k] for k in keys], np.float32)
    actions, states_out, extra = policy.compute_actions(obs_batch, state_batches, prev_action, prev_reward, info,
                                                        explore=explore)
    if normalize_actions is None:
        normalize_actions = config["normalize_actions"]
    if clip_actions is None:
        clip_actions = config["clip_actions"]
    actions = env_actions(actions, policy.action_space, bool(normalize_actions), bool(clip_actions))
    out = {k: actions[i] for i, k in enumerate(keys)}
    if state is not None or full_fetch:
        return out, {k: [s[i] for s in states_out] for i, k in enumerate(keys)}, extra
    return out


__all__ = ["compute_single_action", "compute_actions"]
