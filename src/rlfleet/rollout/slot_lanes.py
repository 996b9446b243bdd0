"""The vectorised multi-agent sampler's lanes: which policy acts for which slots, and how a
lane's rows become its policy's batch.

Each policy owns the slots the policy mapping gives it (`map_slot_lanes` calls
`policy_mapping_fn` once per slot), all in one group of the env's slot layout: a lane
(`SlotLane`). `lane_batch` builds a lane's SampleBatch from the chunk buffers without
per-agent objects: rows ordered by sub-env, then slot, then time, masked by the `alive`
flags, and postprocessed by the policy in one call (GAE runs vectorised over all of its
trajectories: each (episode, slot) is one, segmented by a temporary trajectory key that
replaces `eps_id` during postprocessing).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.policy_mapping import call_mapping_fn
from rlfleet.rollout.postprocessing import postprocess_for_learning
from rlfleet.rollout.vector_sampler_eligibility import OtherAgentBatchesUnavailable

SB = SampleBatch
VALID = "_valid"  # the chunk buffers' alive mask (not a batch column)


class SlotLane:
    """One policy's slots (all of one group) and its chunk buffers `[T, num_envs, slots, ...]`."""

    def __init__(self, pid: str, group: str, slots: np.ndarray, group_size: int, first_index: int):
        self.pid = pid
        self.group = group
        self.slots = slots
        self.full = len(slots) == group_size and bool((slots == np.arange(group_size)).all())
        # How to index the group's `[num_envs, S, ...]` arrays: a slice (views, no copies)
        # when the slots are consecutive, else the index array.
        consecutive = bool((np.diff(slots) == 1).all())
        self.index = slice(int(slots[0]), int(slots[-1]) + 1) if consecutive else slots
        self.agent_index = first_index + slots  # the `agent_index` column: the slot's place in the layout
        self.slot_list: List[int] = slots.tolist()
        self.reward_keys: List[Tuple[Any, str]] = []  # per slot, its `agent_rewards` key (see `map_slot_lanes`)
        self.buffers: Dict[str, np.ndarray] = {}  # its policy's own columns (the env's are per group)
        self.steps = 0  # the buffers' T
        # Per step, views made once per buffer allocation (`step_views`, `alloc`): the sampler's
        # per-step work is then a list index, not a few indexing and reshaping calls.
        self.rows: Optional[List[Tuple[np.ndarray, np.ndarray]]] = None  # see `step_views`
        self.extra_rows: List[Tuple[str, np.ndarray]] = []  # its own columns as `[T, num_envs * slots, ...]`
        self.views_of: Optional[np.ndarray] = None  # the group observation buffer `rows` are views of

    def step_views(self, group_buffers: Dict[str, np.ndarray]) -> None:
        """`rows[t]`: per step t of the group's chunk buffers, the lane's observations and its
        entries of the actions, each as a view `[num_envs * slots, ...]`; None when the slots
        make no such view (neither all of the group's nor one slot: the sampler gathers them per
        step). Made again only when the buffers change."""
        obs, acts = group_buffers[SB.OBS], group_buffers[SB.ACTIONS]
        if self.views_of is obs:
            return
        self.views_of = obs
        self.rows = None
        if self.full or len(self.slots) == 1:
            rows = [(_rows_view(o[:, self.index]), _rows_view(a[:, self.index])) for o, a in zip(obs, acts)]
            if all(o is not None and a is not None for o, a in rows):
                self.rows = rows

    def alloc(self, T: int, num_envs: int, extra: Dict[str, np.ndarray], deferred: Tuple[str, ...]) -> None:
        """The lane's own columns: its policy's extra outputs and deferred ones `[T, num_envs, slots, ...]`."""
        lead = (T, num_envs, len(self.slots))
        self.steps = T
        self.buffers = {key: np.zeros((*lead, *value.shape[1:]), value.dtype) for key, value in extra.items()}
        for key in deferred:
            self.buffers[key] = np.zeros(lead, np.float32)
        self.extra_rows = [(key, self.buffers[key].reshape(T, -1, *value.shape[1:])) for key, value in extra.items()]


def _rows_view(a: np.ndarray) -> Optional[np.ndarray]:
    """`a [num_envs, slots, ...]` as `[num_envs * slots, ...]` when that is a view of it, else None."""
    flat = a.reshape(-1, *a.shape[2:])
    return flat if np.may_share_memory(flat, a) else None


def map_slot_lanes(worker: Any, groups: Mapping[str, Any]) -> List[SlotLane]:
    """The lanes of `worker`'s policies over the slot `groups` (`{name: SlotGroup}`), in the
    policy map's order (as the general path orders its batches); raises when the mapping
    names an unknown policy or gives one policy slots of two groups."""
    w = worker
    owned: Dict[str, Tuple[str, List[int]]] = {}
    first = 0
    firsts = {}
    for name, group in groups.items():
        firsts[name] = first
        first += group.num_slots
        for k, aid in enumerate(group.agents):
            pid = call_mapping_fn(w.policy_mapping_fn, aid, None, w)
            if pid not in w.policy_map:
                raise ValueError(f"The policy mapping returned {pid!r} for agent {aid!r}, which is not a policy "
                                 f"of this worker; known policy ids: {sorted(w.policy_map)}")
            lane = owned.setdefault(pid, (name, []))
            if lane[0] != name:
                raise ValueError(f"Policy {pid!r} is mapped to agents of slot groups {lane[0]!r} and {name!r}; on "
                                 "the vectorised multi-agent path a policy acts for slots of one group (map each "
                                 "group to its own policies)")
            lane[1].append(k)
    order = [pid for pid in w.policy_map if pid in owned]
    lanes = [SlotLane(pid, owned[pid][0], np.array(owned[pid][1]), groups[owned[pid][0]].num_slots,
                      firsts[owned[pid][0]]) for pid in order]
    for lane in lanes:
        agents = groups[lane.group].agents
        lane.reward_keys = [(agents[k], lane.pid) for k in lane.slots.tolist()]
    return lanes


def lane_batch(lane: SlotLane, group_buffers: Dict[str, np.ndarray], rows: int, env_eps: np.ndarray,
               env_t: np.ndarray, policy: Any) -> SampleBatch:
    """The lane's first `rows` steps as its policy's batch, postprocessed by `policy`.

    Args:
        lane: the lane.
        group_buffers: its group's chunk buffers `[T, num_envs, slots, ...]` (with `VALID`).
        rows: the steps of the chunk written.
        env_eps, env_t: per step and sub-env `[T, num_envs]`: its episode's id and step.
        policy: the lane's policy.
    """
    b = group_buffers
    # The live rows, as (step, sub-env, slot in the lane) in sub-env, slot, time order; every
    # column is one gather of them.
    i, k, t = np.nonzero(np.moveaxis(b[VALID][:rows, :, lane.index], 0, 2))
    n, m = b[VALID].shape[1], len(lane.slots)
    # Rows of the `[T * n * S, ...]` views: `take` copies whole rows (3-index fancy
    # indexing of large observations is many times slower).
    group_rows = (t * n + i) * b[VALID].shape[2] + lane.slots[k]
    lane_rows = (t * n + i) * m + k
    cols = {key: np.take(b[key].reshape(-1, *b[key].shape[3:]), group_rows, axis=0)
            for key in (SB.OBS, SB.NEXT_OBS, SB.ACTIONS, SB.REWARDS, SB.TERMINATEDS, SB.DONES)}
    cols[SB.TRUNCATEDS] = cols[SB.DONES] & ~cols[SB.TERMINATEDS]
    cols[SB.T] = env_t[t, i]
    for key, buf in lane.buffers.items():
        cols[key] = np.take(buf.reshape(-1, *buf.shape[3:]), lane_rows, axis=0)
    eps = cols[SB.EPS_ID] = env_eps[t, i]
    cols[SB.ENV_ID] = i.astype(np.int64)
    cols[SB.AGENT_INDEX] = lane.agent_index[k].astype(np.int64)
    batch = SampleBatch(cols)
    if not batch.count:
        return batch
    # Each (episode, slot) is one trajectory: a key that changes exactly where they do
    # stands in for `eps_id` while the policy postprocesses (trajectory ends, GAE).
    env_id, agent = cols[SB.ENV_ID], cols[SB.AGENT_INDEX]
    starts = np.ones(batch.count, bool)
    starts[1:] = (eps[1:] != eps[:-1]) | (env_id[1:] != env_id[:-1]) | (agent[1:] != agent[:-1])
    batch[SB.EPS_ID] = np.cumsum(starts)
    batch = postprocess_for_learning(policy, batch, OtherAgentBatchesUnavailable(policy), None)
    if batch.count != len(eps):
        raise ValueError(f"{type(policy).__name__}.postprocess_trajectory changed the number of rows; the "
                         "vectorised multi-agent sampler needs it to keep them (use the general multi-agent path)")
    batch[SB.EPS_ID] = eps
    return batch
