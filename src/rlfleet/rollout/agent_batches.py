"""Per-agent trajectories -> SampleBatches, for the multi-agent sampler.

A closed transition (`MultiAgentEpisode.rows`) is one tuple `(obs, new_obs, action, reward,
terminated, done, t, acted, j)`, where `acted` is its acting group's `(extra outputs,
actions)` arrays and `j` its row there. When a batch is built, each policy's columns are
converted once for all its trajectories (the acting groups' arrays concatenated and
indexed) and sliced per trajectory (`agent_batches`); anything unusual (ragged or object
columns) falls back to one trajectory at a time (`_agent_batch`), with the same result.
"""
from __future__ import annotations

from collections import defaultdict
from itertools import accumulate
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.postprocessing import drop_state_outs, postprocess_for_learning

SB = SampleBatch


def postprocessed_batches(episodes: List[MultiAgentEpisode], worker, policy_of: Callable[[str], Any],
                          callbacks=None) -> Dict[str, SampleBatch]:
    """`{policy id: batch}` (in the worker's `policy_map` order) of every agent trajectory of
    `episodes`, each postprocessed by its policy, which sees the other agents' trajectories
    of its episode as `other_agent_batches`; `callbacks.on_postprocess_trajectory` runs on
    each when given. The episodes' rows are emptied."""
    batches = trajectory_batches(episodes)
    per_policy: Dict[str, List[SampleBatch]] = defaultdict(list)
    for ep in episodes:
        pre = {aid: (policy_of(ep.policy_for(aid)), batches[id(ep), aid]) for aid in ep.rows}
        for aid, (policy, batch) in pre.items():
            pid = ep.policy_for(aid)
            others = {o: pb for o, pb in pre.items() if o != aid}
            post = postprocess_for_learning(policy, batch, others, ep)
            if policy.is_recurrent():  # as the single-agent sampler does
                drop_state_outs(post)
            if callbacks is not None:
                callbacks.on_postprocess_trajectory(
                    worker=worker, episode=ep, agent_id=aid, policy_id=pid,
                    policies=worker.policy_map, postprocessed_batch=post, original_batches=pre)
            per_policy[pid].append(post)
        ep.rows, ep.num_rows = {}, 0
    order = [pid for pid in worker.policy_map if pid in per_policy]  # stable: the map's order
    return {pid: SampleBatch.concat_samples(per_policy[pid]) for pid in order}


def trajectory_batches(episodes: List[MultiAgentEpisode]) -> Dict[Tuple[int, Any], SampleBatch]:
    """`{(id(episode), agent): batch}` of every agent trajectory, built policy by policy."""
    trajectories: Dict[str, list] = {}
    for ep in episodes:
        for aid, rows in ep.rows.items():
            trajectories.setdefault(ep.policy_for(aid), []).append((ep, aid, rows))
    out = {}
    for group in trajectories.values():
        for (ep, aid, _), batch in zip(group, agent_batches(group)):
            out[id(ep), aid] = batch
    return out


def stack_obs(obs: List[Any]) -> np.ndarray:
    """`np.stack(obs)`, in a fifth of the time for the usual equally shaped arrays."""
    try:
        out = np.array(obs)
    except ValueError:
        return np.stack(obs)  # with its own error
    first = obs[0]
    if out.dtype == object or type(first) is not np.ndarray or out.shape[1:] != first.shape:
        return np.stack(obs)  # anything unusual: as it always was
    return out


def _column(values: tuple) -> Optional[np.ndarray]:
    """`np.asarray(values)` when every value is a NumPy array or scalar of one dtype and
    shape (then each trajectory's slice equals its own `np.asarray`), else None."""
    try:
        out = np.asarray(values)
        dtypes = {v.dtype for v in values}
    except (ValueError, AttributeError):
        return None
    if len(dtypes) != 1 or out.dtype == object:
        return None
    return out


def _acted_columns(acted: tuple, js: tuple) -> Optional[Tuple[np.ndarray, Dict[str, np.ndarray]]]:
    """`(actions, {column: extra outputs})` of rows whose acting group's arrays are `acted[r]`
    and row there `js[r]`: the groups' arrays concatenated once, then indexed. None where the
    groups differ in columns, dtypes or shapes (then the rows are read one by one)."""
    ids = list(map(id, acted))
    groups = dict(zip(ids, acted))  # each group once, in order
    extras = [extra for extra, _ in groups.values()]
    first = extras[0]
    if any(extra.keys() != first.keys() for extra in extras):
        return None
    columns = [[acts for _, acts in groups.values()]] + [[extra[k] for extra in extras] for k in first]
    out = []
    try:
        sizes = list(map(len, columns[0]))
        offsets = dict(zip(groups, accumulate(sizes, initial=0)))
        index = np.fromiter(map(offsets.__getitem__, ids), np.int64, len(ids)) + np.asarray(js, np.int64)
        for arrays in columns:
            if set(map(type, arrays)) != {np.ndarray} or list(map(len, arrays)) != sizes:
                return None
            dtypes = {a.dtype for a in arrays}
            if len(dtypes) != 1 or np.dtype(object) in dtypes:
                return None
            out.append(np.concatenate(arrays)[index])
    except (TypeError, ValueError):  # not arrays of rows, or of other shapes
        return None
    return out[0], dict(zip(first, out[1:]))


def agent_batches(group: List[tuple]) -> List[SampleBatch]:
    """The batches of one policy's agent trajectories `(episode, agent, rows)`: each column
    converted once for all of them, then sliced (what `_agent_batch` gives each one)."""
    lengths = [len(rows) for _, _, rows in group]
    pooled = [row for _, _, rows in group for row in rows]
    obs, next_obs, actions, rewards, terms, dones, ts, acted, js = zip(*pooled)
    obs, next_obs, columns = _column(obs), _column(next_obs), _acted_columns(acted, js)
    if obs is None or next_obs is None or columns is None:
        return [_agent_batch(ep, aid, rows) for ep, aid, rows in group]
    terms, dones = np.asarray(terms), np.asarray(dones)
    base = {SB.OBS: obs, SB.NEXT_OBS: next_obs, SB.ACTIONS: columns[0],
            SB.REWARDS: np.asarray(rewards).astype(np.float32), SB.TERMINATEDS: terms,
            SB.TRUNCATEDS: dones & ~terms, SB.DONES: dones, SB.T: np.asarray(ts)}
    base.update(columns[1])
    base[SB.EPS_ID] = np.repeat(np.array([ep.episode_id for ep, _, _ in group], np.int64), lengths)
    base[SB.ENV_ID] = np.repeat(np.array([ep.env_index for ep, _, _ in group], np.int64), lengths)
    base[SB.AGENT_INDEX] = np.repeat(np.array([ep.agent_index(aid) for ep, aid, _ in group], np.int64), lengths)
    out, start = [], 0
    for n in lengths:
        end = start + n
        out.append(SampleBatch({k: v[start:end] for k, v in base.items()}))
        start = end
    return out


def _agent_batch(ep: MultiAgentEpisode, aid, rows: List[tuple]) -> SampleBatch:
    """One agent trajectory's batch, column by column as appending its rows one by one
    would give: obs, new_obs, actions, rewards, terminateds, truncateds, dones, t, the
    policy's extra outputs (in the first row's order), then the ids."""
    n = len(rows)
    obs, next_obs, actions, rewards, terms, dones, ts, acted, js = zip(*rows)
    terms, dones = np.asarray(terms), np.asarray(dones)
    cols = {SB.OBS: np.asarray(obs), SB.NEXT_OBS: np.asarray(next_obs), SB.ACTIONS: np.asarray(actions),
            SB.REWARDS: np.asarray(rewards).astype(np.float32), SB.TERMINATEDS: terms,
            SB.TRUNCATEDS: dones & ~terms, SB.DONES: dones, SB.T: np.asarray(ts)}
    lists: Dict[str, list] = {}
    for (e, _), j in zip(acted, js):
        for k, v in e.items():
            lists.setdefault(k, []).append(v[j])
    cols.update({k: np.asarray(v) for k, v in lists.items()})
    batch = SampleBatch(cols)
    batch[SB.EPS_ID] = np.full(n, ep.episode_id, np.int64)
    batch[SB.ENV_ID] = np.full(n, ep.env_index, np.int64)
    batch[SB.AGENT_INDEX] = np.full(n, ep.agent_index(aid), np.int64)
    return batch


__all__ = ["agent_batches", "postprocessed_batches", "stack_obs", "trajectory_batches"]
