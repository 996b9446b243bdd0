"""The multi-agent sampler: the general path (per-agent trajectories, policy mapping).

Every step, the agents of all sub-envs that hold a fresh observation are grouped by policy
and each policy computes their actions in one batched forward pass. Each agent's
transitions are kept apart (`MultiAgentEpisode.rows`); when a batch is built, every agent
trajectory is postprocessed by its own policy, which sees the other agents' trajectories of
the same episode as `other_agent_batches = {agent_id: (policy, batch)}`. The result is a
`MultiAgentBatch` of one `SampleBatch` per policy; its `count` is env steps.

Step semantics (see `rlfleet.env.multi_agent_env`): an agent acts on the step after it
received an observation; its transition closes when its next observation (or its own or the
episode's end) arrives, and collects every reward given to it meanwhile.

Batch sizes: `rollout_fragment_length * num_envs_per_worker` steps, counted as env steps or
agent steps (`multiagent.count_steps_by`). With `truncate_episodes` a batch ends as soon
as that count is reached (agent steps may overshoot by less than one env step's worth of
agents); with `complete_episodes` it holds only finished episodes totalling at least that.

Env checks (`rlfleet.env.checks`), per agent: each observation in detail until the first
episode ends (and the first observation of each policy), then a vectorised bounds / NaN
check of each preprocessed observation and a finite-reward check (none after the first
episode with `disable_env_checking`). An env that raises or breaks its contract is an
`EnvError` naming the env, worker, sub-env, episode, step and agent; the sampler then
stops (later collections raise it again) until `restart()`.
"""
from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.env.checks import (EnvCheckError, EnvError, ObsBatchCheck, env_call_error, observation_problem,
                                reward_problem)
from rlfleet.env.multi_agent_env import ALL, MultiAgentVectorEnv
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.metrics import summarize_perf
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.policy_mapping import call_mapping_fn
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.spaces import env_actions

SB = SampleBatch
logger = logging.getLogger(__name__)


class MultiAgentSampler:
    """Collects MultiAgentBatches from a worker's MultiAgentEnvs.

    Args:
        worker: the owning RolloutWorker; its `policy_map`, `preprocessors`, `filters` and
            `policy_mapping_fn` are read at every use, so policies added at run time take
            effect at once (the mapping: from the next episode on); see `on_policy_removed`
            for removals.
        vector_env: the sub-envs.
        callbacks: the DefaultCallbacks instance.
        settings: the per-run settings (see `SamplerSettings`).
    """

    def __init__(self, *, worker, vector_env: MultiAgentVectorEnv, callbacks, settings: SamplerSettings):
        self.worker = worker
        self.env = vector_env
        self.callbacks = callbacks
        self.settings = settings
        self.num_envs = vector_env.num_envs
        self._hooks = {
            name: callbacks.overrides(name)
            for name in ("on_episode_start", "on_episode_step", "on_episode_end", "on_postprocess_trajectory")
        }
        self._eps_base = settings.episode_id_base
        self._eps_counter = 0
        self._episodes: List[Optional[MultiAgentEpisode]] = [None] * self.num_envs
        self._finished: List[MultiAgentEpisode] = []  # ended, rows not yet batched
        self._checked: set = set()  # policies whose first observation passed the detailed check
        self.steps_since_sync = 0
        self.metrics: List[RolloutMetrics] = []
        self._perf = {"env_wait": 0.0, "inference": 0.0, "processing": 0.0, "steps": 0}
        # Env checks (see the module docstring).
        self._detailed_checks = True
        self._step_checks = True
        self._obs_checks: Dict[str, Tuple[Any, ObsBatchCheck]] = {}  # pid -> (preprocessor, check)
        self._failed: Optional[EnvError] = None

    # --- public ------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:
        """One MultiAgentBatch (see the module docstring for its size)."""
        target = self.settings.fragment_length * self.num_envs
        env_steps = 0
        finished_seen, done = -1, 0
        while True:
            env_steps += self._step()
            if self.settings.complete_episodes:
                if len(self._finished) != finished_seen:  # recounted only when an episode ended
                    finished_seen = len(self._finished)
                    done = sum(e.num_rows if self.settings.count_agent_steps else e.length for e in self._finished)
                if done >= target:
                    return self._build(self._finished, env_steps=sum(e.length for e in self._finished))
            else:
                if self.settings.count_agent_steps:
                    ready = (sum(e.num_rows for e in self._finished)
                             + sum(e.num_rows for e in self._episodes if e is not None))
                else:  # env steps: no need to walk the episodes every step
                    ready = env_steps
                if ready >= target:
                    live = [e for e in self._episodes if e is not None and e.num_rows]
                    return self._build(self._finished + live, env_steps=env_steps)

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs until `num_episodes` more episodes finish; returns their metrics rows
        (their samples are dropped: evaluation needs only the metrics)."""
        start = len(self.metrics)
        while len(self.metrics) - start < num_episodes:
            self._step()
            self._finished = []
            for e in self._episodes:
                if e is not None and not self.settings.complete_episodes:
                    e.rows, e.num_rows = {}, 0
        return self.metrics[start:]

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self.metrics = self.metrics, []
        return out

    def perf_stats(self) -> Dict[str, float]:
        return summarize_perf(self._perf)

    def restart(self) -> None:
        """Forgets the episodes in flight (and an env failure); the next step resets every sub-env."""
        self._failed = None
        self._episodes = [None] * self.num_envs
        self._finished = []
        self.metrics = []
        self.steps_since_sync = 0

    def get_state(self) -> Dict[str, Any]:
        # Episode ids keep counting across a checkpoint restore (they key offline data).
        return {"episodes_started": int(self._eps_counter)}

    def set_state(self, state: Dict[str, Any]) -> None:
        self._eps_counter = int(state.get("episodes_started", self._eps_counter))

    def on_policy_removed(self, policy_id: str) -> None:
        """Called after the worker removed `policy_id` (and set its new mapping function).

        Agents of running episodes mapped to it are re-mapped through the worker's current
        `policy_mapping_fn`; what they collected so far is dropped (there is no policy left
        to postprocess or train on it), and so are their rows in ended episodes not yet
        batched. Agents joining a running episode later are mapped as at its start, unless
        that mapping names a policy that no longer exists.
        """
        self._checked.discard(policy_id)
        worker = self.worker
        for ep in self._finished:
            for aid in [a for a in ep.rows if ep.policy_for(a) == policy_id]:
                ep.num_rows -= len(ep.rows.pop(aid)[SB.REWARDS])
        for ep in self._episodes:
            if ep is None:
                continue
            ep._mapping_fn = self._fallback_mapping(ep._mapping_fn)
            for aid in [a for a, pid in ep._policy.items() if pid == policy_id]:
                new_pid = call_mapping_fn(worker.policy_mapping_fn, aid, ep, worker)
                if new_pid not in worker.policy_map:
                    raise ValueError(
                        f"remove_policy({policy_id!r}): agent {aid!r} of a running episode used it, and the "
                        f"policy mapping now returns {new_pid!r}, which is not a policy of this worker either; "
                        f"pass policy_mapping_fn=... mapping agents to one of {sorted(worker.policy_map)}")
                ep._policy[aid] = new_pid
                if aid in ep.rows:
                    ep.num_rows -= len(ep.rows.pop(aid)[SB.REWARDS])
                ep.open.pop(aid, None)
                if aid in ep._last_raw_obs and aid not in ep.done_agents:
                    _, pp, filt = self._resolve(new_pid)
                    ep._last_obs[aid] = filt(pp.transform(ep._last_raw_obs[aid]), update=False)

    def _fallback_mapping(self, mapping: Callable) -> Callable:
        """`mapping`, or the worker's current mapping where it names a removed policy."""
        worker = self.worker

        def mapped(aid, episode):
            pid = mapping(aid, episode)
            if pid in worker.policy_map:
                return pid
            return call_mapping_fn(worker.policy_mapping_fn, aid, episode, worker)

        return mapped

    # --- policy lookup -----------------------------------------------------------------
    def _resolve(self, pid: str):
        w = self.worker
        if pid in w.policy_map:
            return w.policy_map[pid], w.preprocessors[pid], w.filters[pid]
        raise ValueError(f"The policy mapping returned {pid!r}, which is not a policy of this worker; "
                         f"known policy ids: {sorted(w.policy_map)}")

    # --- one env step for every sub-env -----------------------------------------------
    def _step(self) -> int:
        if self._failed is not None:
            raise self._failed.with_context()
        clock = time.perf_counter
        t0 = clock()
        for i in range(self.num_envs):
            if self._episodes[i] is None:
                self._start_episode(i, *self._reset(i))
        # Who acts: agents with an observation and no action in flight, grouped by policy.
        groups: Dict[str, List[Tuple[int, Any]]] = defaultdict(list)
        for i, ep in enumerate(self._episodes):
            for aid in ep._last_obs:
                if aid not in ep.open and aid not in ep.done_agents:
                    groups[ep.policy_for(aid)].append((i, aid))
        actions: List[Dict[Any, Any]] = [{} for _ in range(self.num_envs)]
        for pid, members in groups.items():
            policy = self._resolve(pid)[0]
            obs = np.stack([self._episodes[i]._last_obs[aid] for i, aid in members])
            # explore=None: each policy's own `explore` (per-policy configs may differ).
            acts, _, extra = policy.compute_actions(
                obs, explore=None, timestep=policy.global_timestep + self.steps_since_sync)
            cfg = policy.config
            to_env = env_actions(acts, policy.action_space, bool(cfg.get("normalize_actions", True)),
                                 bool(cfg.get("clip_actions", False)))
            for j, (i, aid) in enumerate(members):
                ep = self._episodes[i]
                row_extra = {k: v[j] for k, v in extra.items()}
                ep.open[aid] = {"obs": ep._last_obs[aid], "action": acts[j], "extra": row_extra,
                                "t": ep.length, "reward": 0.0}
                ep._prev_action[aid] = ep._last_action.get(aid)
                ep._last_action[aid] = acts[j]
                ep._last_extra[aid] = row_extra
                actions[i][aid] = to_env[j]
        t1 = clock()
        env_wait = 0.0
        for i, ep in enumerate(self._episodes):
            if not actions[i] and not ep.open:
                raise ValueError(f"Sub-env {i} ({type(self.env.envs[i]).__name__}) gave no agent an "
                                 "observation, yet its episode is not over (set terminateds['__all__'])")
            s = clock()
            try:
                result = self.env.envs[i].step(actions[i])
            except Exception as e:
                raise self._located(env_call_error("step()", e), ep, ep.length + 1) from e
            env_wait += clock() - s
            if not (isinstance(result, tuple) and len(result) == 5):
                raise self._located(EnvCheckError(
                    f"the env's step() returned {_what(result)}; multi-agent envs return (obs, rewards, "
                    "terminateds, truncateds, infos) dicts"), ep, ep.length + 1)
            self._process(i, ep, *result)
        self.steps_since_sync += self.num_envs
        perf = self._perf
        perf["inference"] += t1 - t0
        perf["env_wait"] += env_wait
        perf["processing"] += clock() - t1 - env_wait
        perf["steps"] += 1
        return self.num_envs

    # --- env checks (rlfleet.env.checks) ------------------------------------------------
    def _located(self, error: EnvError, ep: Optional[MultiAgentEpisode], step: int, agent_id: Any = None,
                 index: Optional[int] = None) -> EnvError:
        """`error` with its location; remembered: later collections raise it again (the
        envs are mid-step, in an unknown state) until `restart()`."""
        env_id = self.settings.env_id or type(self.env.envs[0]).__name__
        error = error.with_context(
            env_id=env_id, worker_index=self.settings.worker_index,
            sub_env_index=ep.env_index if ep is not None else index,
            episode_id=ep.episode_id if ep is not None else self._eps_base + self._eps_counter + 1,
            step=step, agent_id=agent_id)
        self._failed = error
        return error

    def _reset(self, i: int):
        try:
            result = self.env.reset_at(i)
        except Exception as e:
            raise self._located(env_call_error("reset()", e), None, 0, index=i) from e
        if not (isinstance(result, tuple) and len(result) == 2):
            raise self._located(EnvCheckError(f"the env's reset() returned {_what(result)}; multi-agent envs "
                                              "return (obs, infos) dicts"), None, 0, index=i)
        return result

    def _checked_obs(self, ep: MultiAgentEpisode, aid, pid: str, pp, raw) -> np.ndarray:
        """The preprocessed observation of agent `aid`, checked (see the module docstring)."""
        space = pp.original_space
        if self._detailed_checks or pid not in self._checked:
            problem = observation_problem(raw, space)
            if problem is not None:
                raise self._located(EnvCheckError(f"{problem} (policy {pid!r})"), ep, ep.length, aid)
            self._checked.add(pid)
        try:
            obs = pp.transform(raw)
        except Exception as e:
            problem = observation_problem(raw, space) or f"the preprocessor {pp} could not read it: {e}"
            raise self._located(EnvCheckError(f"{problem} (policy {pid!r})"), ep, ep.length, aid) from e
        if self._step_checks:
            cached = self._obs_checks.get(pid)
            if cached is None or cached[0] is not pp:
                cached = self._obs_checks[pid] = (pp, ObsBatchCheck(pp.observation_space))
            if not cached[1].ok(obs):
                problem = observation_problem(raw, space)
                if problem is not None:
                    raise self._located(EnvCheckError(f"{problem} (policy {pid!r})"), ep, ep.length, aid)
                # The env is not at fault: the preprocessor's outputs leave the space it
                # declares (a custom preprocessor). Say so once and stop checking them.
                logger.warning("The outputs of preprocessor %s (policy %r) leave its observation_space %s, "
                               "though the observations are in their space; not checking them any more",
                               pp, pid, pp.observation_space)
                cached[1].trivial = True
        return obs

    # --- observations and transitions -------------------------------------------------
    def _observe(self, ep: MultiAgentEpisode, obs: Dict[Any, Any], infos: Dict[Any, Any]) -> Dict[Any, Any]:
        """observation_fn, then each agent's policy's preprocessor and filter."""
        if self.settings.observation_fn is not None and obs:
            obs = self.settings.observation_fn(agent_obs=obs, worker=self.worker, base_env=self.env,
                                      policies=self.worker.policy_map, episode=ep)
        out = {}
        for aid, raw in obs.items():
            pid = ep.policy_for(aid)
            _, pp, filt = self._resolve(pid)
            out[aid] = filt(self._checked_obs(ep, aid, pid, pp, raw))
            ep._last_raw_obs[aid] = raw
            ep._last_info[aid] = infos.get(aid, {})
        return out

    def _start_episode(self, i: int, obs: Dict[Any, Any], infos: Dict[Any, Any],
                       carried: Optional[MultiAgentEpisode] = None) -> None:
        self._eps_counter += 1
        # The mapping in force now stays with this episode to its end.
        fn, worker = self.worker.policy_mapping_fn, self.worker
        ep = MultiAgentEpisode(self._eps_base + self._eps_counter, i,
                               lambda aid, episode: call_mapping_fn(fn, aid, episode, worker))
        self._episodes[i] = ep
        if carried is None:
            ep._last_obs.update(self._observe(ep, obs, infos))
        else:  # soft horizon: the observations were processed already
            for aid in obs:
                ep._last_obs[aid] = carried._last_obs[aid]
                ep._last_raw_obs[aid] = carried._last_raw_obs[aid]
                ep._last_info[aid] = infos.get(aid, {})
        if self._hooks["on_episode_start"]:
            self.callbacks.on_episode_start(worker=self.worker, base_env=self.env, policies=self.worker.policy_map,
                                            episode=ep, env_index=i)

    def _process(self, i: int, ep: MultiAgentEpisode, obs, rewards, terminateds, truncateds, infos) -> None:
        ep.length += 1
        term_all, trunc_all = bool(terminateds.get(ALL, False)), bool(truncateds.get(ALL, False))
        rules = self.settings.rules
        end = rules.end(term_all, trunc_all, ep.length)
        over = end.over
        # A horizon that ends the episode as terminal (soft horizon) makes every agent's end terminal.
        horizon_terminal = over and not (term_all or trunc_all) and end.terminal
        seen = self._observe(ep, obs, infos)
        clipper = self.settings.reward_clipper
        check_rewards = self._step_checks
        for aid, r in rewards.items():
            try:
                r = float(r)
            except (TypeError, ValueError):
                raise self._located(EnvCheckError(reward_problem(r)), ep, ep.length, aid) from None
            if check_rewards and not math.isfinite(r):
                raise self._located(EnvCheckError(reward_problem(r)), ep, ep.length, aid)
            key = (aid, ep.policy_for(aid))
            ep.agent_rewards[key] = ep.agent_rewards.get(key, 0.0) + r
            ep.total_reward += r
            ep._prev_reward[aid] = ep._last_reward.get(aid, 0.0)
            ep._last_reward[aid] = r
            if aid in ep.open:
                ep.open[aid]["reward"] += float(clipper(np.float64(r))) if clipper is not None else r
        agents = set(seen) | {a for a in terminateds if a != ALL} | {a for a in truncateds if a != ALL}
        if over:
            agents |= set(ep.open)
        for aid in agents:
            term = bool(terminateds.get(aid, False)) or term_all or horizon_terminal
            done = term or bool(truncateds.get(aid, False)) or over
            term = rules.terminal(term)
            ep._last_terminated[aid], ep._last_truncated[aid] = term, done and not term
            if aid in seen:
                ep._last_obs[aid] = seen[aid]
            if aid in ep.open and (aid in seen or done):
                self._close(ep, aid, ep._last_obs[aid], term, done)
            if done:
                ep.done_agents.add(aid)
        if self._hooks["on_episode_step"]:
            self.callbacks.on_episode_step(worker=self.worker, base_env=self.env, episode=ep, env_index=i)
        if over:
            self._end_episode(i, ep)
            if not end.reset:
                # The env goes on: the next episode starts from the current observations.
                self._start_episode(i, seen, infos, carried=ep)

    def _close(self, ep: MultiAgentEpisode, aid, next_obs, terminated: bool, done: bool) -> None:
        step = ep.open.pop(aid)
        cols = ep.rows.get(aid)
        if cols is None:
            cols = ep.rows[aid] = defaultdict(list)
        cols[SB.OBS].append(step["obs"])
        cols[SB.NEXT_OBS].append(next_obs)
        cols[SB.ACTIONS].append(step["action"])
        cols[SB.REWARDS].append(step["reward"])
        cols[SB.TERMINATEDS].append(terminated)
        cols[SB.TRUNCATEDS].append(done and not terminated)
        cols[SB.DONES].append(done)
        cols[SB.T].append(step["t"])
        for k, v in step["extra"].items():
            cols[k].append(v)
        ep.num_rows += 1

    def _end_episode(self, i: int, ep: MultiAgentEpisode) -> None:
        if self._hooks["on_episode_end"]:
            self.callbacks.on_episode_end(worker=self.worker, base_env=self.env, policies=self.worker.policy_map,
                                          episode=ep, env_index=i)
        self.metrics.append(ep.to_metrics())
        self._episodes[i] = None
        if self._detailed_checks:  # the first episode is checked: from now on, vectorised checks
            self._detailed_checks = False
            self._step_checks = self.settings.check_env_steps
        if ep.num_rows:
            self._finished.append(ep)

    # --- batches -------------------------------------------------------------------------
    def _agent_batch(self, ep: MultiAgentEpisode, aid, cols: Dict[str, list]) -> SampleBatch:
        n = len(cols[SB.REWARDS])
        batch = SampleBatch({k: np.asarray(v) for k, v in cols.items()})
        batch[SB.REWARDS] = batch[SB.REWARDS].astype(np.float32)
        batch[SB.EPS_ID] = np.full(n, ep.episode_id, np.int64)
        batch[SB.ENV_ID] = np.full(n, ep.env_index, np.int64)
        batch[SB.AGENT_INDEX] = np.full(n, ep.agent_index(aid), np.int64)
        return batch

    def _build(self, episodes: List[MultiAgentEpisode], env_steps: int) -> MultiAgentBatch:
        per_policy: Dict[str, List[SampleBatch]] = defaultdict(list)
        for ep in episodes:
            pre = {aid: (self._resolve(ep.policy_for(aid))[0], self._agent_batch(ep, aid, cols))
                   for aid, cols in ep.rows.items()}
            for aid, (policy, batch) in pre.items():
                pid = ep.policy_for(aid)
                others = {o: pb for o, pb in pre.items() if o != aid}
                post = policy.postprocess_trajectory(batch, others, ep)
                if self._hooks["on_postprocess_trajectory"]:
                    self.callbacks.on_postprocess_trajectory(
                        worker=self.worker, episode=ep, agent_id=aid, policy_id=pid,
                        policies=self.worker.policy_map, postprocessed_batch=post, original_batches=pre)
                per_policy[pid].append(post)
            ep.rows, ep.num_rows = {}, 0
        self._finished = [e for e in self._finished if e not in episodes]
        order = [pid for pid in self.worker.policy_map if pid in per_policy]  # stable: the map's order
        batches = {pid: SampleBatch.concat_samples(per_policy[pid]) for pid in order}
        if self.settings.compress_observations:
            # After postprocessing (bootstrapping reads `new_obs`); the learner decompresses.
            for batch in batches.values():
                compress_columns(batch)
        return MultiAgentBatch(batches, env_steps)


def _what(result: Any) -> str:
    return f"a tuple of {len(result)}" if isinstance(result, tuple) else f"a {type(result).__name__}"
