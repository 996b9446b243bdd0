"""The multi-agent fast path: slot envs (env/vector_multi_agent_env.py), arrays per policy.

Each policy owns the slots the policy mapping gives it (`policy_mapping_fn` is called once
per slot, again only when the worker's mapping or policies change), all in one group of the
env's slot layout: a *lane* (`_Lane`). Per step, each lane gathers its slots' observations of
every sub-env into its preallocated `[T, num_envs, slots]` buffers and acts on them in one
batched forward pass through its policy's chunk actor (policy/actor.py), whose `finish()`
fills in the log-likelihoods and values of the whole chunk at once. Dead slots are acted on
too (their rows are masked out): fixed shapes, no per-agent Python work.

A batch is built from the buffers without per-agent objects: rows ordered by sub-env, then
slot, then time, masked by the `alive` flags, and postprocessed by the policy in one call
per policy (GAE runs vectorised over all of its trajectories: each (episode, slot) is one,
segmented by a temporary trajectory key that replaces `eps_id` during postprocessing).

Semantics are the general path's (rollout/multi_agent_sampler.py) for envs whose agents act
at every step they are alive (parallel envs): the same rows, episode rules, metrics
(`agent_rewards` per (agent, policy), hence `policy_reward_mean`) and batch sizes
(`rollout_fragment_length` env steps per sub-env, `truncate_episodes`). What it does not
offer (`vector_sampler_unavailable`) sends the worker to the general path instead.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.env.checks import EnvCheckError, EnvError, ObsBatchCheck, env_call_error, observation_problem
from rlfleet.env.multi_agent_env import MultiAgentVectorEnv
from rlfleet.env.vector_multi_agent_env import SlotMultiAgentEnv, SlotReset, VectorMultiAgentEnv
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.models.preprocessors import NoPreprocessor
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.metrics import summarize_perf
from rlfleet.rollout.policy_mapping import call_mapping_fn
from rlfleet.rollout.postprocessing import postprocess_for_learning
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.filters import NoFilter
from rlfleet.utils.spaces import env_actions

SB = SampleBatch
logger = logging.getLogger(__name__)
_VALID = "_valid"  # the buffers' alive mask (not a batch column)
NOT_SLOT_ENVS = "the env does not offer the slot API"
_HOOKS = ("on_episode_start", "on_episode_step", "on_episode_end", "on_postprocess_trajectory")


def vector_sampler_unavailable(worker: Any, settings: SamplerSettings) -> Optional[str]:
    """Why `worker` cannot sample with `VectorMultiAgentSampler` (None: it can). Its env must
    be a MultiAgentVectorEnv of slot envs; what the fast path does not offer yet sends the
    worker to the general path, which runs the same envs through their dict API."""
    env = worker.env
    if not isinstance(env, MultiAgentVectorEnv) or not all(isinstance(e, SlotMultiAgentEnv) for e in env.envs):
        return NOT_SLOT_ENVS
    if settings.complete_episodes:
        return "'batch_mode': 'complete_episodes'"
    if settings.count_agent_steps:
        return "'multiagent.count_steps_by': 'agent_steps'"
    if settings.observation_fn is not None:
        return "'multiagent.observation_fn' is set"
    if settings.rules.soft_horizon:
        return "'soft_horizon': True"
    if settings.record_infos:
        return "info dicts are recorded ('output' or a policy that reads infos)"
    if settings.render:
        return "'render_env': True"
    hooks = [name for name in _HOOKS if worker.callbacks.overrides(name)]
    if hooks:
        return f"the callbacks override {hooks[0]}"
    recurrent = [pid for pid, p in worker.policy_map.items() if p.is_recurrent()]
    if recurrent:
        return f"policy {recurrent[0]!r} is recurrent"
    return None


class _Lane:
    """One policy's slots (all of one group) and its chunk buffers `[T, num_envs, slots, ...]`."""

    def __init__(self, pid: str, group: str, slots: np.ndarray, group_size: int, first_index: int):
        self.pid = pid
        self.group = group
        self.slots = slots
        self.full = len(slots) == group_size and bool((slots == np.arange(group_size)).all())
        self.agent_index = first_index + slots  # the `agent_index` column: the slot's place in the layout
        self.buffers: Dict[str, np.ndarray] = {}

    def take(self, arr: np.ndarray) -> np.ndarray:
        """This lane's slots of a group's `[num_envs, S, ...]` array."""
        return arr if self.full else arr[:, self.slots]


class VectorMultiAgentSampler:
    """Collects MultiAgentBatches from slot envs, one batched forward pass per policy per step.

    Args:
        worker: the owning RolloutWorker (`policy_map`, `preprocessors`, `filters`,
            `policy_mapping_fn`, read when the lanes are (re)built).
        vector_env: the worker's MultiAgentVectorEnv of `SlotMultiAgentEnv`s.
        callbacks: the DefaultCallbacks instance (no episode hooks: see
            `vector_sampler_unavailable`).
        settings: the per-run settings (see `SamplerSettings`).
    """

    def __init__(self, *, worker, vector_env: MultiAgentVectorEnv, callbacks, settings: SamplerSettings):
        self.worker = worker
        self.base_env = vector_env
        self.env = VectorMultiAgentEnv(vector_env.envs, seeds=vector_env.next_seed)
        self.callbacks = callbacks
        self.settings = settings
        self.num_envs = self.env.num_envs
        self.groups = self.env.groups
        self.steps_since_sync = 0
        self.metrics: List[RolloutMetrics] = []
        self._perf = {"env_wait": 0.0, "inference": 0.0, "processing": 0.0, "steps": 0}
        self._eps_base = settings.episode_id_base
        self._eps_counter = 0
        self._lanes: List[_Lane] = []
        self._lanes_key: Optional[tuple] = None
        self._cur_obs: Optional[Dict[str, np.ndarray]] = None
        self._failed: Optional[EnvError] = None
        self._checked_first = False
        n = self.num_envs
        self._eps_id = np.zeros(n, np.int64)
        self._ep_len = np.zeros(n, np.int64)
        self._ep_ret = np.zeros(n, np.float64)
        self._slot_ret = {g: np.zeros((n, grp.num_slots)) for g, grp in self.groups.items()}
        self._seen = {g: np.zeros((n, grp.num_slots), bool) for g, grp in self.groups.items()}

    # --- public ------------------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:
        """`rollout_fragment_length` steps of every sub-env, one SampleBatch per policy."""
        rows = self._collect(self.settings.fragment_length)
        return self._build(rows)

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs until `num_episodes` more episodes finish; returns their metrics rows."""
        start = len(self.metrics)
        while len(self.metrics) - start < num_episodes:
            self._collect(self.settings.fragment_length, stop_after=start + num_episodes)
        return self.metrics[start:]

    def restart(self) -> None:
        """Forgets the episodes in flight (and an env failure); the next step resets every sub-env."""
        self._failed = None
        self._cur_obs = None
        self.metrics = []
        self.steps_since_sync = 0

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self.metrics = self.metrics, []
        return out

    def get_state(self) -> Dict[str, Any]:
        """The episode counter (episode ids keep counting across a checkpoint restore)."""
        return {"episodes_started": int(self._eps_counter)}

    def perf_stats(self) -> Dict[str, float]:
        return summarize_perf(self._perf)

    def set_state(self, state: Dict[str, Any]) -> None:
        self._eps_counter = int(state.get("episodes_started", self._eps_counter))

    # --- lanes: the policy mapping, once per slot ----------------------------------------------
    def _ensure_lanes(self) -> None:
        w = self.worker
        key = (w.policy_mapping_fn, tuple(w.policy_map))
        if key == self._lanes_key:
            return
        owned: Dict[str, Tuple[str, List[int]]] = {}
        first = 0
        firsts = {}
        for name, group in self.groups.items():
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
        order = [pid for pid in w.policy_map if pid in owned]  # the policy map's order, as the general path
        self._lanes = [_Lane(pid, owned[pid][0], np.array(owned[pid][1]), self.groups[owned[pid][0]].num_slots,
                             firsts[owned[pid][0]]) for pid in order]
        self._lanes_key = key

    # --- episodes -------------------------------------------------------------------------------
    def _start(self) -> None:
        n = self.num_envs
        self._cur_obs = {g: np.zeros((n, grp.num_slots, *grp.observation_space.shape), np.float32)
                         for g, grp in self.groups.items()}
        self._alive = {g: np.zeros((n, grp.num_slots), bool) for g, grp in self.groups.items()}
        for i in range(n):
            self._new_episode(i, self._reset(i))

    def _reset(self, i: int) -> SlotReset:
        try:
            first = self.env.reset_at(i)
        except Exception as e:
            raise self._located(env_call_error("reset()", e), i, 0,
                                episode=self._eps_base + self._eps_counter + 1) from e
        if not self._checked_first:  # the first episode's observations, in detail
            for g, group in self.groups.items():
                for k in np.flatnonzero(first.alive[g]):
                    problem = observation_problem(first.obs[g][k], group.observation_space)
                    if problem is not None:
                        raise self._located(EnvCheckError(problem), i, 0, group.agents[k],
                                            self._eps_base + self._eps_counter + 1)
        return first

    def _new_episode(self, i: int, first: SlotReset) -> None:
        self._eps_counter += 1
        self._eps_id[i] = self._eps_base + self._eps_counter
        self._ep_len[i] = 0
        self._ep_ret[i] = 0.0
        for g in self.groups:
            self._cur_obs[g][i] = first.obs[g]
            self._alive[g][i] = first.alive[g]
            self._slot_ret[g][i] = 0.0
            self._seen[g][i] = first.alive[g]
        for policy in self.worker.policy_map.in_memory_policies():
            # An exploration that acts per episode (ParameterNoise) hears of each start.
            start = getattr(getattr(policy, "exploration", None), "on_episode_start", None)
            if start is not None:
                start()

    def _end_episode(self, i: int) -> None:
        agent_rewards = {}
        for lane in self._lanes:
            agents = self.groups[lane.group].agents
            seen, ret = self._seen[lane.group][i], self._slot_ret[lane.group][i]
            for k in lane.slots[seen[lane.slots]]:
                agent_rewards[(agents[k], lane.pid)] = float(ret[k])
        self.metrics.append(RolloutMetrics(int(self._ep_len[i]), float(self._ep_ret[i]),
                                           agent_rewards=agent_rewards))
        self._checked_first = True

    # --- the step loop ----------------------------------------------------------------------------
    def _collect(self, steps: int, stop_after: Optional[int] = None) -> int:
        """Steps every sub-env up to `steps` times (until `stop_after` metrics rows exist,
        when given); returns the number of steps."""
        if self._failed is not None:
            raise self._failed.with_context()
        self._ensure_lanes()
        if self._cur_obs is None:
            self._start()
        with single_threaded_blas():  # small products: see fast/blas.py
            return self._collect_chunk(steps, stop_after)

    def _collect_chunk(self, T: int, stop_after: Optional[int]) -> int:
        n, w, s = self.num_envs, self.worker, self.settings
        clock = time.perf_counter
        perf = self._perf
        rules, clipper = s.rules, s.reward_clipper
        horizon = rules.horizon
        lanes = self._lanes
        groups = self.groups
        acting = []
        for lane in lanes:
            policy = w.policy_map[lane.pid]
            size = n * len(lane.slots)
            actor = policy.actor(None, policy.global_timestep + self.steps_since_sync, steps=T, num_envs=size)
            pp, filt = w.preprocessors[lane.pid], w.filters[lane.pid]
            direct = type(pp) is NoPreprocessor and type(filt) is NoFilter
            cfg = policy.config
            acting.append((lane, policy, actor, pp, filt, direct, bool(cfg.get("normalize_actions", True)),
                           bool(cfg.get("clip_actions", False))))
        actions = {g: np.zeros((n, grp.num_slots, *grp.action_space.shape),
                               np.int64 if isinstance(grp.action_space, gym.spaces.Discrete) else np.float32)
                   for g, grp in groups.items()}
        rows = 0
        inference = env_wait = processing = 0.0
        for t in range(T):
            t0 = clock()
            for lane, policy, actor, pp, filt, direct, normalize, clip in acting:
                obs = lane.take(self._cur_obs[lane.group])
                flat = obs.reshape(-1, *obs.shape[2:])
                if not direct:
                    flat = filt.apply_batch(pp.transform_batch(flat))
                b = lane.buffers
                if b:
                    row = b[SB.OBS][t].reshape(flat.shape)
                    row[...] = flat
                else:  # a copy: the buffers are sized by the first step's outputs
                    row = np.array(flat, np.float32 if flat.dtype != np.uint8 else np.uint8)
                acts, _, extra = actor.act(row)
                if not b:
                    b = self._alloc(lane, T, row, acts, extra, actor.deferred)
                    b[SB.OBS][0] = row.reshape(b[SB.OBS].shape[1:])
                shape = (n, len(lane.slots))
                b[SB.ACTIONS][t] = acts.reshape(*shape, *acts.shape[1:])
                for key, value in extra.items():
                    b[key][t] = value.reshape(*shape, *value.shape[1:])
                b[_VALID][t] = lane.take(self._alive[lane.group])
                b[SB.EPS_ID][t] = self._eps_id[:, None]
                b[SB.T][t] = self._ep_len[:, None]
                to_env = env_actions(acts, policy.action_space, normalize, clip)
                to_env = to_env.reshape(*shape, *to_env.shape[1:])
                if lane.full:
                    actions[lane.group][...] = to_env
                else:
                    actions[lane.group][:, lane.slots] = to_env
            t1 = clock()
            try:
                step = self.env.step(actions)
            except Exception as e:
                raise self._located(env_call_error("step()", e), None, None) from e
            t2 = clock()
            self._ep_len += 1
            term_all, trunc_all = step.terminated_all, step.truncated_all
            over = term_all | trunc_all
            if horizon is not None:
                at_horizon = (self._ep_len >= horizon) & ~over
                over = over | at_horizon
                # The reference's horizon end is terminal unless `no_done_at_end` (episode_rules.py).
                forced_terminal = at_horizon if not rules.no_done_at_end else np.zeros(n, bool)
            else:
                forced_terminal = np.zeros(n, bool)
            all_terminal = (term_all & (not rules.no_done_at_end)) | forced_terminal
            for g in groups:
                rew = step.rewards[g]
                if s.check_env_steps and not math.isfinite(np.add.reduce(rew, axis=None)):
                    self._explain_rewards(g, rew)
                self._slot_ret[g] += rew
                self._ep_ret += rew.sum(axis=1)
                self._seen[g] |= step.alive[g]
            for lane, *_ in acting:
                b, g = lane.buffers, lane.group
                rew = lane.take(step.rewards[g])
                b[SB.REWARDS][t] = clipper(rew) if clipper is not None else rew
                valid = b[_VALID][t]
                term = lane.take(step.terminateds[g]) & (not rules.no_done_at_end)
                term = (term | all_terminal[:, None]) & valid
                b[SB.TERMINATEDS][t] = term
                b[SB.DONES][t] = (term | lane.take(step.truncateds[g]) | over[:, None]) & valid
                new_obs = lane.take(step.obs[g])
                if s.check_env_steps and new_obs.dtype != np.uint8 and not math.isfinite(
                        np.add.reduce(new_obs, axis=None)):
                    self._explain_obs(lane, new_obs, valid)
                b[SB.NEXT_OBS][t] = new_obs
            self._cur_obs = {g: o.astype(np.float32, copy=False) for g, o in step.obs.items()}
            self._alive = step.alive
            self.steps_since_sync += n
            for i in np.flatnonzero(over).tolist():
                self._end_episode(i)
                self._new_episode(i, self._reset(i))
            rows = t + 1
            t3 = clock()
            inference += t1 - t0
            env_wait += t2 - t1
            processing += t3 - t2
            if stop_after is not None and len(self.metrics) >= stop_after:
                break
        perf["inference"] += inference
        perf["env_wait"] += env_wait
        perf["processing"] += processing
        perf["steps"] += rows
        t0 = clock()
        for lane, _, actor, *_ in acting:
            columns = actor.finish()
            for key, column in columns.items():
                lane.buffers[key][:rows] = column.reshape(rows, n, len(lane.slots))
        perf["inference"] += clock() - t0
        self._check_bounds(rows)
        return rows

    def _alloc(self, lane: _Lane, T: int, obs: np.ndarray, acts: np.ndarray, extra: Dict[str, np.ndarray],
               deferred: Tuple[str, ...]) -> Dict[str, np.ndarray]:
        lead = (T, self.num_envs, len(lane.slots))
        b = {
            SB.OBS: np.zeros((*lead, *obs.shape[1:]), obs.dtype),
            SB.NEXT_OBS: np.zeros((*lead, *obs.shape[1:]), obs.dtype),
            SB.ACTIONS: np.zeros((*lead, *acts.shape[1:]), acts.dtype),
            SB.REWARDS: np.zeros(lead, np.float32),
            SB.TERMINATEDS: np.zeros(lead, bool),
            SB.DONES: np.zeros(lead, bool),
            SB.T: np.zeros(lead, np.int64),
            SB.EPS_ID: np.zeros(lead, np.int64),
            _VALID: np.zeros(lead, bool),
        }
        for key, value in extra.items():
            b[key] = np.zeros((*lead, *value.shape[1:]), value.dtype)
        for key in deferred:
            b[key] = np.zeros(lead, np.float32)
        lane.buffers = b
        return b

    # --- env checks -------------------------------------------------------------------------------
    def _located(self, error: EnvError, index: Optional[int], step: Optional[int], agent_id: Any = None,
                 episode: Optional[int] = None) -> EnvError:
        """`error` with its location; remembered: later collections raise it again until `restart()`."""
        if episode is None and index is not None:
            episode = int(self._eps_id[index])
        error = error.with_context(env_id=self.settings.env_id or type(self.env.envs[0]).__name__,
                                   worker_index=self.settings.worker_index, sub_env_index=index,
                                   episode_id=episode, step=step, agent_id=agent_id)
        self._failed = error
        return error

    def _explain_rewards(self, g: str, rew: np.ndarray) -> None:
        i, k = np.argwhere(~np.isfinite(rew))[0]
        raise self._located(EnvCheckError(f"reward {rew[i, k]!r} is not finite"), int(i), int(self._ep_len[i]),
                            self.groups[g].agents[k])

    def _explain_obs(self, lane: _Lane, new_obs: np.ndarray, valid: np.ndarray) -> None:
        bad = ~np.isfinite(new_obs.reshape(*new_obs.shape[:2], -1)).all(axis=2) & valid
        if not bad.any():
            return  # only dead slots' entries, which nothing reads
        i, j = np.argwhere(bad)[0]
        k = lane.slots[j]
        raise self._located(EnvCheckError(observation_problem(new_obs[i, j], self.groups[lane.group].observation_space)
                                          or "the observation is not finite"),
                            int(i), int(self._ep_len[i]), self.groups[lane.group].agents[k])

    def _check_bounds(self, rows: int) -> None:
        """The chunk's live observations against each policy's space (one vectorised check)."""
        if not self.settings.check_env_steps or not rows:
            return
        for lane in self._lanes:
            b = lane.buffers
            check = ObsBatchCheck(self.worker.preprocessors[lane.pid].observation_space)
            valid = b[_VALID][:rows]
            if check.trivial or check.ok(b[SB.NEXT_OBS][:rows][valid]):
                continue
            for t, i, j in np.argwhere(valid):
                if not check.ok(b[SB.NEXT_OBS][t, i, j][None]):
                    k = lane.slots[j]
                    group = self.groups[lane.group]
                    problem = observation_problem(b[SB.NEXT_OBS][t, i, j], group.observation_space)
                    raise self._located(EnvCheckError(problem or f"observation outside {check.space}"), int(i),
                                        int(b[SB.T][t, i, j]) + 1, group.agents[k], int(b[SB.EPS_ID][t, i, j]))

    # --- chunk -> batch ---------------------------------------------------------------------------
    def _build(self, rows: int) -> MultiAgentBatch:
        batches = {}
        for lane in self._lanes:
            batch = self._lane_batch(lane, rows)
            if batch.count:
                batches[lane.pid] = batch
        return MultiAgentBatch(batches, rows * self.num_envs)

    def _lane_batch(self, lane: _Lane, rows: int) -> SampleBatch:
        """The lane's rows ordered by sub-env, slot, then time (alive rows only), postprocessed."""
        b = lane.buffers
        n, m = self.num_envs, len(lane.slots)
        keep = np.moveaxis(b[_VALID][:rows], 0, 2).reshape(-1)
        cols = {}
        for key, buf in b.items():
            if key != _VALID:
                part = np.moveaxis(buf[:rows], 0, 2)
                cols[key] = part.reshape(n * m * rows, *part.shape[3:])[keep]
        cols[SB.TRUNCATEDS] = cols[SB.DONES] & ~cols[SB.TERMINATEDS]
        cols[SB.ENV_ID] = np.repeat(np.arange(n, dtype=np.int64), m * rows)[keep]
        cols[SB.AGENT_INDEX] = np.tile(np.repeat(lane.agent_index.astype(np.int64), rows), n)[keep]
        batch = SampleBatch(cols)
        if not batch.count:
            return batch
        # Each (episode, slot) is one trajectory: a key that changes exactly where they do
        # stands in for `eps_id` while the policy postprocesses (trajectory ends, GAE).
        eps, env_id, agent = cols[SB.EPS_ID], cols[SB.ENV_ID], cols[SB.AGENT_INDEX]
        starts = np.ones(batch.count, bool)
        starts[1:] = (eps[1:] != eps[:-1]) | (env_id[1:] != env_id[:-1]) | (agent[1:] != agent[:-1])
        batch[SB.EPS_ID] = np.cumsum(starts)
        policy = self.worker.policy_map[lane.pid]
        batch = postprocess_for_learning(policy, batch, {}, None)
        if batch.count != len(eps):
            raise ValueError(f"{type(policy).__name__}.postprocess_trajectory changed the number of rows; the "
                             "vectorised multi-agent sampler needs it to keep them (use the general multi-agent path)")
        batch[SB.EPS_ID] = eps
        if self.settings.compress_observations:
            compress_columns(batch)
        return batch


__all__ = ["VectorMultiAgentSampler", "vector_sampler_unavailable"]
