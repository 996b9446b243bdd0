"""The vectorised multi-agent sampler: slot envs (env/vector_multi_agent_env.py), arrays per policy.

Each policy owns the slots the policy mapping gives it (`policy_mapping_fn` is called once
per slot, again only when the worker's mapping or policies change), all in one group of the
env's slot layout: a *lane* (`SlotLane`, rollout/slot_lanes.py). Per step, each lane gathers
its slots' observations of every sub-env into its preallocated `[T, num_envs, slots]`
buffers and acts on them in one batched forward pass through its policy's chunk actor
(policy/actor.py), whose `finish(rows)` fills in the log-likelihoods and values of the
chunk's live rows at once. Dead slots are acted on too (their rows are masked out): fixed
shapes, no per-agent Python work; per step the lanes read views of the buffers made once
(`SlotLane.step_views`), and the batch's terminated / done flags are made once per chunk. Episodes end by `EpisodeRules.end_many`, for every sub-env at once.

A batch is built from the buffers without per-agent objects, one postprocessing call per
policy (`lane_batch`, rollout/slot_lanes.py).

Semantics are the general path's (rollout/multi_agent_sampler.py) for envs whose agents act
at every step they are alive (parallel envs): the same rows, episode rules, metrics
(`agent_rewards` per (agent, policy), hence `policy_reward_mean`) and batch sizes
(`truncate_episodes`, counted in env or agent steps: see `sample`). What it does not
offer (`vector_sampler_unavailable`, rollout/vector_sampler_eligibility.py) sends the worker to
the general path instead.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.checks import EnvCheckError, EnvError, ObsBatchCheck, env_call_error, observation_problem
from rlfleet.env.multi_agent_env import MultiAgentVectorEnv
from rlfleet.env.vector_multi_agent_env import SlotReset, VectorMultiAgentEnv
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.rollout.sampler_bookkeeping import SamplerBookkeeping
from rlfleet.rollout.slot_lanes import VALID as _VALID
from rlfleet.rollout.slot_lanes import SlotLane, lane_batch, map_slot_lanes
from rlfleet.rollout.vector_sampler_eligibility import vector_sampler_unavailable
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.spaces import env_actions

SB = SampleBatch


class VectorMultiAgentSampler(SamplerBookkeeping):
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
        super().__init__(settings)
        self.worker = worker
        self.base_env = vector_env
        self.env = VectorMultiAgentEnv(vector_env.envs, seeds=vector_env.next_seed)
        self.callbacks = callbacks
        self.num_envs = self.env.num_envs
        self.groups = self.env.groups
        self._lanes: List[SlotLane] = []
        self._lanes_key: Optional[tuple] = None
        self._cur_obs: Optional[Dict[str, np.ndarray]] = None
        self._checked_first = False
        self._bufs: Optional[Dict[str, Dict[str, np.ndarray]]] = None
        self._env_eps = self._env_t = np.zeros((0, 0), np.int64)  # per step and sub-env: its episode's id, step
        self._env_over = self._env_terminal = np.zeros((0, 0), bool)  # per step and sub-env: `end_many`'s flags
        self._obs_checks: Dict[str, ObsBatchCheck] = {}
        self._start_hooks: List[Callable[[], None]] = []  # see `_read_start_hooks`
        n = self.num_envs
        self._eps_id = np.zeros(n, np.int64)
        self._ep_len = np.zeros(n, np.int64)
        self._slot_ret = {g: np.zeros((n, grp.num_slots)) for g, grp in self.groups.items()}
        self._seen = {g: np.zeros((n, grp.num_slots), bool) for g, grp in self.groups.items()}

    # --- public ------------------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:
        """`rollout_fragment_length` steps of every sub-env, one SampleBatch per policy; with
        `count_steps_by: agent_steps`, steps until the live agents' rows reach
        `rollout_fragment_length * num_envs` (overshooting by less than one step's rows, as
        the general path). That takes one chunk when no slot is dead; each chunk that dead
        slots make necessary bootstraps the trajectories it cuts, as any fragment end does."""
        if not self.settings.count_agent_steps:
            return self._build(self._collect(self.settings.fragment_length))
        target = self.settings.fragment_length * self.num_envs
        per_step = self.num_envs * sum(group.num_slots for group in self.groups.values())
        parts: List[MultiAgentBatch] = []
        done = 0
        while done < target:
            parts.append(self._build(self._collect(-(-(target - done) // per_step))))
            done += parts[-1].agent_steps()
        return parts[0] if len(parts) == 1 else MultiAgentBatch.concat_samples(parts)

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs until `num_episodes` more episodes finish; returns their metrics rows."""
        start = len(self.metrics)
        while len(self.metrics) - start < num_episodes:
            self._collect(self.settings.fragment_length, stop_after=start + num_episodes)
        return self.metrics[start:]

    def restart(self) -> None:
        """Forgets the episodes in flight (and an env failure); the next step resets every sub-env."""
        self._forget()
        self._cur_obs = None

    # --- lanes: the policy mapping, once per slot ----------------------------------------------
    def _ensure_lanes(self) -> None:
        w = self.worker
        key = (w.policy_mapping_fn, tuple(w.policy_map))
        if key != self._lanes_key:
            self._lanes = map_slot_lanes(w, self.groups)
            self._lanes_key = key

    # --- episodes -------------------------------------------------------------------------------
    def _start(self) -> None:
        n = self.num_envs
        self._cur_obs = {g: np.zeros((n, grp.num_slots, *grp.observation_space.shape),
                                     np.uint8 if grp.observation_space.dtype == np.uint8 else np.float32)
                         for g, grp in self.groups.items()}
        self._alive = {g: np.zeros((n, grp.num_slots), bool) for g, grp in self.groups.items()}
        for i in range(n):
            self._new_episode(i, self._reset(i))

    def _reset(self, i: int) -> SlotReset:
        try:
            first = self.env.reset_at(i)
        except Exception as e:
            raise self._located(env_call_error("reset()", e), i, 0, episode=self._next_episode_id()) from e
        if not self._checked_first:  # the first episode's observations, in detail
            for g, group in self.groups.items():
                for k in np.flatnonzero(first.alive[g]):
                    problem = observation_problem(first.obs[g][k], group.observation_space)
                    if problem is not None:
                        raise self._located(EnvCheckError(problem), i, 0, group.agents[k], self._next_episode_id())
        return first

    def _new_episode(self, i: int, first: SlotReset) -> None:
        self._eps_counter += 1
        self._eps_id[i] = self._eps_base + self._eps_counter
        self._ep_len[i] = 0
        for g in self.groups:
            self._cur_obs[g][i] = first.obs[g]
            self._alive[g][i] = first.alive[g]
            self._slot_ret[g][i] = 0.0
            self._seen[g][i] = first.alive[g]
        for start in self._start_hooks:
            start()

    def _read_start_hooks(self) -> None:
        """An exploration that acts per episode (ParameterNoise) hears of each start: the hooks
        of the policies in memory, read before the episodes start (none join or leave within a chunk)."""
        self._start_hooks = [hook for hook in (policy.exploration.bound_hook("on_episode_start")
                                               for policy in self.worker.policy_map.in_memory_policies())
                             if hook is not None]

    def _end_episode(self, i: int) -> None:
        # Python lists: one conversion per group, not a NumPy scalar per agent.
        seen = {g: s[i].tolist() for g, s in self._seen.items()}
        ret = {g: r[i].tolist() for g, r in self._slot_ret.items()}
        agent_rewards = {}
        for lane in self._lanes:
            seen_g, ret_g = seen[lane.group], ret[lane.group]
            for key, k in zip(lane.reward_keys, lane.slot_list):
                if seen_g[k]:
                    agent_rewards[key] = ret_g[k]
        total = sum(float(r[i].sum()) for r in self._slot_ret.values())
        self.metrics.append(RolloutMetrics(int(self._ep_len[i]), total, agent_rewards=agent_rewards))
        self._checked_first = True

    # --- the step loop ----------------------------------------------------------------------------
    def _collect(self, steps: int, stop_after: Optional[int] = None) -> int:
        """Steps every sub-env up to `steps` times (until `stop_after` metrics rows exist,
        when given); returns the number of steps."""
        self._raise_if_failed()
        self._ensure_lanes()
        if self._cur_obs is None:
            self._read_start_hooks()
            self._start()
        with single_threaded_blas():  # small products: see fast/blas.py
            return self._collect_chunk(steps, stop_after)

    def _collect_chunk(self, T: int, stop_after: Optional[int]) -> int:
        n, w, s = self.num_envs, self.worker, self.settings
        clock = time.perf_counter
        end_many, clipper = s.rules.end_many, s.reward_clipper
        checks = s.check_env_steps
        bufs = self._group_buffers(T)
        acting = []
        for lane in self._lanes:
            policy = w.policy_map[lane.pid]
            actor = policy.actor(None, policy.global_timestep + self.steps_since_sync, steps=T,
                                 num_envs=n * len(lane.slots))
            space = policy.action_space
            # Discrete actions go to the env as they are; other spaces through `env_actions`.
            convert = None if isinstance(space, gym.spaces.Discrete) and not int(space.start) else (
                space, bool(policy.config.get("normalize_actions", True)), bool(policy.config.get("clip_actions")))
            lane.step_views(bufs[lane.group])
            acting.append((lane, actor, convert))
        self._read_start_hooks()  # the lanes' policies are in memory now
        # Per group, its buffers and running arrays, read into locals once per chunk.
        groups = [(g, b[SB.OBS], b[_VALID], b[SB.ACTIONS], b[SB.REWARDS], b[SB.TERMINATEDS], b[SB.DONES],
                   b[SB.NEXT_OBS], self._slot_ret[g], self._seen[g]) for g, b in bufs.items()]
        cur_obs, alive = self._cur_obs, self._alive
        env_eps, env_t, env_over, env_terminal = self._env_eps, self._env_t, self._env_over, self._env_terminal
        env_over[:] = False
        env_terminal[:] = False
        rows = 0
        inference = env_wait = processing = 0.0
        for t in range(T):
            t0 = clock()
            env_acts = {}
            for g, obs_buf, valid_buf, act_buf, *_ in groups:
                obs_buf[t] = cur_obs[g]
                valid_buf[t] = alive[g]
                env_acts[g] = act_buf[t]
            env_eps[t] = self._eps_id
            env_t[t] = self._ep_len
            for lane, actor, convert in acting:
                acts = self._act(lane, actor, bufs[lane.group], t, T)
                if convert is not None:
                    env_acts[lane.group] = self._to_env(env_acts[lane.group], lane, acts, convert)
            t1 = clock()
            try:
                step = self.env.step(env_acts)
            except Exception as e:
                raise self._located(env_call_error("step()", e), None, None) from e
            t2 = clock()
            self._ep_len += 1
            # The episodes' ends (env flags, horizon): no soft horizon here (see
            # `vector_sampler_unavailable`), so every episode that ends is reset.
            end = end_many(step.terminated_all, step.truncated_all, self._ep_len)
            over = end.over
            ended = over.any()
            if ended:
                env_over[t] = over
                env_terminal[t] = end.terminal
            for g, _, valid_buf, _, rew_buf, term_buf, done_buf, next_buf, slot_ret, seen in groups:
                rew, new_obs, now_alive = step.rewards[g], step.obs[g], step.alive[g]
                if checks:
                    if not math.isfinite(np.add.reduce(rew, axis=None)):
                        self._explain_rewards(g, rew)
                    if new_obs.dtype != np.uint8 and not math.isfinite(np.add.reduce(new_obs, axis=None)):
                        self._explain_obs(g, new_obs, valid_buf[t])
                rew_buf[t] = clipper(rew) if clipper is not None else rew
                # The slots' own flags as the env gives them (the truncations in the dones' buffer);
                # `_flags` makes them the batch's terminateds / dones once per chunk.
                term_buf[t] = step.terminateds[g]
                done_buf[t] = step.truncateds[g]
                next_buf[t] = new_obs
                slot_ret += rew
                seen |= now_alive
                cur_obs[g] = new_obs
                alive[g] = now_alive
            self.steps_since_sync += n
            if ended:
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
        perf = self._perf
        perf["env_wait"] += env_wait
        perf["steps"] += rows
        t0 = clock()
        self._flags(rows)
        perf["processing"] += processing + clock() - t0
        t0 = clock()
        for lane, actor, _ in acting:
            # The deferred columns (log-likelihoods, values) of the live rows only: no batch
            # keeps a dead slot's row, and the value pass costs per row.
            valid = bufs[lane.group][_VALID][:rows, :, lane.index]
            live = None if valid.all() else np.flatnonzero(valid)
            for key, column in actor.finish(live).items():
                if live is None:
                    lane.buffers[key][:rows] = column.reshape(valid.shape)
                else:
                    lane.buffers[key][:rows].reshape(-1)[live] = column
        perf["inference"] += inference + clock() - t0
        self._check_bounds(rows)
        return rows

    def _act(self, lane: SlotLane, actor: Any, b: Dict[str, np.ndarray], t: int, T: int) -> np.ndarray:
        """The lane's step `t`: its policy acts on its slots' observations; the actions and its
        extra outputs go into the buffers. Returns the actions `[num_envs * slots, ...]`."""
        views = lane.rows
        if views is not None:
            obs, act_rows = views[t]
        else:  # slots that make no view (see `SlotLane.step_views`): gathered
            obs = b[SB.OBS][t][:, lane.index].reshape(-1, *b[SB.OBS].shape[3:])
        acts, _, extra = actor.act(obs)
        if lane.steps != T:
            lane.alloc(T, self.num_envs, extra, actor.deferred)
        for key, buf in lane.extra_rows:
            buf[t] = extra[key]
        if views is not None:
            act_rows[...] = acts
        else:
            b[SB.ACTIONS][t][:, lane.index] = acts.reshape(self.num_envs, len(lane.slots), *acts.shape[1:])
        return acts

    def _flags(self, rows: int) -> None:
        """The chunk's terminateds and dones, from the slots' own flags (as the loop stored them)
        and their episodes' ends, for every step at once. terminated: the slot's own (not under
        `no_done_at_end`) or its episode's terminal end; done: that, the slot's truncation or its
        episode's end. Live slots only."""
        over, terminal = self._env_over[:rows, :, None], self._env_terminal[:rows, :, None]
        for b in self._bufs.values():
            valid, term, done = b[_VALID][:rows], b[SB.TERMINATEDS][:rows], b[SB.DONES][:rows]
            if self.settings.rules.no_done_at_end:
                term[...] = False
            term |= terminal
            term &= valid
            done |= term
            done |= over
            done &= valid

    @staticmethod
    def _to_env(env_acts: np.ndarray, lane: SlotLane, acts: np.ndarray, convert: tuple) -> np.ndarray:
        """The group's actions as the env takes them, with `lane`'s (`acts [num_envs * slots, ...]`)
        converted (`env_actions`)."""
        space, normalize, clip = convert
        out = np.asarray(env_actions(acts, space, normalize, clip))
        out = out.reshape(len(env_acts), len(lane.slots), *acts.shape[1:])
        if lane.full:
            return out
        env_acts = np.array(env_acts, copy=True)  # the buffer keeps the policy's own actions
        env_acts[:, lane.index] = out
        return env_acts

    def _group_buffers(self, T: int) -> Dict[str, Dict[str, np.ndarray]]:
        """Per group, the env's columns of a chunk `[T, num_envs, S, ...]` (made once per size)."""
        if self._bufs is not None and len(self._env_eps) == T:
            return self._bufs
        n = self.num_envs
        self._bufs = {}
        for g, group in self.groups.items():
            lead = (T, n, group.num_slots)
            obs_space, act_space = group.observation_space, group.action_space
            obs_dtype = np.uint8 if obs_space.dtype == np.uint8 else np.float32
            discrete = isinstance(act_space, gym.spaces.Discrete)
            self._bufs[g] = {
                SB.OBS: np.zeros((*lead, *obs_space.shape), obs_dtype),
                SB.NEXT_OBS: np.zeros((*lead, *obs_space.shape), obs_dtype),
                SB.ACTIONS: np.zeros((*lead, *act_space.shape), np.int64 if discrete else np.float32),
                SB.REWARDS: np.zeros(lead, np.float32),
                SB.TERMINATEDS: np.zeros(lead, bool),
                SB.DONES: np.zeros(lead, bool),
                _VALID: np.zeros(lead, bool),
            }
        self._env_eps = np.zeros((T, n), np.int64)
        self._env_t = np.zeros((T, n), np.int64)
        self._env_over = np.zeros((T, n), bool)
        self._env_terminal = np.zeros((T, n), bool)
        return self._bufs

    # --- env checks -------------------------------------------------------------------------------
    def _located(self, error: EnvError, index: Optional[int], step: Optional[int], agent_id: Any = None,
                 episode: Optional[int] = None) -> EnvError:
        """`error` with its location; remembered: later collections raise it again until `restart()`."""
        if episode is None and index is not None:
            episode = int(self._eps_id[index])
        return self._locate(error, sub_env_index=index, episode_id=episode, step=step, agent_id=agent_id)

    def _env_label(self) -> str:
        return type(self.env.envs[0]).__name__

    def _explain_rewards(self, g: str, rew: np.ndarray) -> None:
        i, k = np.argwhere(~np.isfinite(rew))[0]
        raise self._located(EnvCheckError(f"reward {rew[i, k]!r} is not finite"), int(i), int(self._ep_len[i]),
                            self.groups[g].agents[k])

    def _explain_obs(self, g: str, new_obs: np.ndarray, valid: np.ndarray) -> None:
        bad = ~np.isfinite(new_obs.reshape(*new_obs.shape[:2], -1)).all(axis=2) & valid
        if not bad.any():
            return  # only dead slots' entries, which nothing reads
        i, k = np.argwhere(bad)[0]
        group = self.groups[g]
        raise self._located(EnvCheckError(observation_problem(new_obs[i, k], group.observation_space)
                                          or "the observation is not finite"), int(i), int(self._ep_len[i]),
                            group.agents[k])

    def _check_bounds(self, rows: int) -> None:
        """The chunk's live observations against their group's space (one vectorised check)."""
        if not self.settings.check_env_steps or not rows:
            return
        for g, b in self._bufs.items():
            group = self.groups[g]
            check = self._obs_checks.setdefault(g, ObsBatchCheck(group.observation_space))
            valid = b[_VALID][:rows]
            if check.trivial or check.ok(b[SB.NEXT_OBS][:rows][valid]):
                continue
            for t, i, k in np.argwhere(valid):
                if not check.ok(b[SB.NEXT_OBS][t, i, k][None]):
                    problem = observation_problem(b[SB.NEXT_OBS][t, i, k], group.observation_space)
                    raise self._located(EnvCheckError(problem or f"observation outside {check.space}"), int(i),
                                        int(self._env_t[t, i]) + 1, group.agents[k], int(self._env_eps[t, i]))

    # --- chunk -> batch ---------------------------------------------------------------------------
    def _build(self, rows: int) -> MultiAgentBatch:
        batches = {}
        for lane in self._lanes:
            batch = self._lane_batch(lane, rows)
            if batch.count:
                batches[lane.pid] = batch
        return MultiAgentBatch(batches, rows * self.num_envs)

    def _lane_batch(self, lane: SlotLane, rows: int) -> SampleBatch:
        """The lane's rows ordered by sub-env, slot, then time (alive rows only), postprocessed."""
        batch = lane_batch(lane, self._bufs[lane.group], rows, self._env_eps, self._env_t,
                           self.worker.policy_map[lane.pid])
        if batch.count and self.settings.compress_observations:
            compress_columns(batch)
        return batch

__all__ = ["VectorMultiAgentSampler", "vector_sampler_unavailable"]
