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
episode ends (and the first observation of each policy), then a bounds / NaN check of each
preprocessed observation (`ObsRowCheck`) and a finite-reward check (none after the first
episode with `disable_env_checking`). An env that raises or breaks its contract is an
`EnvError` naming the env, worker, sub-env, episode, step and agent; the sampler then
stops (later collections raise it again) until `restart()`.

Cost (the sampler's own, per agent step): a few dict operations; closed transitions become
batches in rollout/agent_batches.py. Per step, the policy lookups are read once per policy
(again after any user code), and an observation that NoPreprocessor and NoFilter would
return unchanged skips them. Acting (rollout/policy_actors.py) runs with single-threaded
BLAS, as on the single-agent path (`rlfleet.fast.blas.single_threaded_blas`).
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.env.checks import (EnvCheckError, EnvError, ObsRowCheck, env_call_error, observation_problem,
                                reward_problem)
from rlfleet.env.multi_agent_env import ALL, MultiAgentVectorEnv
from rlfleet.models.preprocessors import NoPreprocessor
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.agent_batches import postprocessed_batches, stack_obs
from rlfleet.rollout.agent_memory import recurrent_columns, recurrent_inputs
from rlfleet.rollout.policy_actors import PolicyActors
from rlfleet.rollout.policy_removal import remap_removed_policy
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.metrics import summarize_perf
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.multi_agent_episode import STEP_ACTED as _ACTED, STEP_ACTION as _ACTION, STEP_J as _J
from rlfleet.rollout.multi_agent_episode import STEP_OBS as _OBS, STEP_REWARD as _REWARD, STEP_T as _T
from rlfleet.rollout.policy_mapping import call_mapping_fn
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.filters import NoFilter
from rlfleet.utils.spaces import env_actions

SB = SampleBatch
_isfinite = math.isfinite
_FLOAT32 = np.dtype(np.float32)
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
        self._step_hook = self._hooks["on_episode_step"]
        # Each policy acts through one actor (policy/actor.py) per `sample()`, which may leave
        # the log-likelihoods and values of the rows acted on to one pass at its end
        # (`_finish_actors`), unless a callback or `observation_fn` could read them per
        # step (`episode.last_extra_action_outs_for`) or change the weights meanwhile.
        self._actors = PolicyActors(defer=settings.observation_fn is None and not any(
            self._hooks[name] for name in ("on_episode_start", "on_episode_step", "on_episode_end")))
        self._rules, self._clipper = settings.rules, settings.reward_clipper
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
        self._obs_checks: Dict[str, Tuple[Any, ObsRowCheck]] = {}  # pid -> (preprocessor, check)
        self._use_cache: Dict[str, tuple] = {}  # pid -> (preprocessor, filter, check, direct): `_uses`
        self._failed: Optional[EnvError] = None

    # --- public ------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:
        """One MultiAgentBatch (see the module docstring for its size)."""
        with single_threaded_blas():  # small products: see fast/blas.py
            try:
                return self._sample()
            finally:  # after an error too: rows acted on keep the weights they acted with
                self._finish_actors()

    def _sample(self) -> MultiAgentBatch:
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
                    self._finish_actors()
                    return self._build(self._finished, env_steps=sum(e.length for e in self._finished))
            else:
                if self.settings.count_agent_steps:
                    ready = (sum(e.num_rows for e in self._finished)
                             + sum(e.num_rows for e in self._episodes if e is not None))
                else:  # env steps: no need to walk the episodes every step
                    ready = env_steps
                if ready >= target:
                    self._finish_actors()
                    live = [e for e in self._episodes if e is not None and e.num_rows]
                    return self._build(self._finished + live, env_steps=env_steps)

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs until `num_episodes` more episodes finish; returns their metrics rows
        (their samples are dropped: evaluation needs only the metrics)."""
        start = len(self.metrics)
        with single_threaded_blas():
            try:
                while len(self.metrics) - start < num_episodes:
                    self._step()
                    self._finished = []
                    for e in self._episodes:
                        if e is not None and not self.settings.complete_episodes:
                            e.rows, e.num_rows = {}, 0
            finally:  # the actions still in flight (and after an error)
                self._finish_actors()
        return self.metrics[start:]

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self.metrics = self.metrics, []
        return out

    def perf_stats(self) -> Dict[str, float]:
        return summarize_perf(self._perf)

    def restart(self) -> None:
        """Forgets the episodes in flight (and an env failure); the next step resets every sub-env."""
        self._failed = None
        self._actors.clear()
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
        """Called after the worker removed `policy_id` (and set its new mapping function): its
        agents are re-mapped and what they collected is dropped (see policy_removal.py)."""
        self._checked.discard(policy_id)
        remap_removed_policy(policy_id, self._finished, [ep for ep in self._episodes if ep is not None], self.worker)

    # --- policy lookup -----------------------------------------------------------------
    def _resolve(self, pid: str):
        w = self.worker
        if pid in w.policy_map:
            return w.policy_map[pid], w.preprocessors[pid], w.filters[pid]
        raise ValueError(f"The policy mapping returned {pid!r}, which is not a policy of this worker; "
                         f"known policy ids: {sorted(w.policy_map)}")

    def _uses(self, pid: str):
        """`(preprocessor, filter, observation check, direct)` of `pid` (see `_use_cache`)."""
        w = self.worker
        if pid not in w.policy_map:
            self._resolve(pid)  # raises, naming the known policies
        pp, filt = w.preprocessors[pid], w.filters[pid]
        cached = self._obs_checks.get(pid)
        if cached is None or cached[0] is not pp:
            cached = self._obs_checks[pid] = (pp, ObsRowCheck(pp.observation_space))
        # NoPreprocessor (float32) and NoFilter return a float32 array as it is: skipped for one.
        direct = type(pp) is NoPreprocessor and pp.dtype == np.float32 and type(filt) is NoFilter
        use = self._use_cache[pid] = (pp, filt, cached[1], direct)
        return use

    # --- one env step for every sub-env -----------------------------------------------
    def _step(self) -> int:
        if self._failed is not None:
            raise self._failed.with_context()
        clock = time.perf_counter
        t0 = clock()
        # Per-policy lookups, read afresh every step (and after any user code: `_user_code_ran`).
        self._use_cache = {}
        episodes = self._episodes
        for i in range(self.num_envs):
            if episodes[i] is None:
                self._start_episode(i, *self._reset(i))
        # Who acts: agents with an observation and no action in flight, grouped by policy.
        groups: Dict[str, Tuple[list, list, list]] = {}
        for ep in episodes:
            open_, done_agents, mapped = ep.open, ep.done_agents, ep._policy
            for aid, obs in ep._last_obs.items():
                if aid not in open_ and aid not in done_agents:
                    pid = mapped.get(aid)
                    if pid is None:
                        pid = ep.policy_for(aid)
                    group = groups.get(pid)
                    if group is None:
                        group = groups[pid] = ([], [], [])
                    group[0].append(ep)
                    group[1].append(aid)
                    group[2].append(obs)
        actions: List[Dict[Any, Any]] = [{} for _ in range(self.num_envs)]
        actors = self._actors
        for pid, (members, aids, obs_list) in groups.items():
            policy = self._resolve(pid)[0]
            obs_batch = stack_obs(obs_list)
            timestep = policy.global_timestep + self.steps_since_sync
            recurrent = policy.is_recurrent()
            if recurrent:  # each agent's own memory (rollout/agent_memory.py), stacked
                states, prev_actions, prev_rewards = recurrent_inputs(policy, members, aids)
                acts, state_out, extra = actors.act(policy, obs_batch, timestep, states, prev_actions, prev_rewards)
                state_out = recurrent_columns(extra, states, state_out, prev_actions, prev_rewards)
            else:
                acts, _, extra = actors.act(policy, obs_batch, timestep)  # the deferred columns: `_finish_actors`
            cfg = policy.config
            to_env = env_actions(acts, policy.action_space, bool(cfg.get("normalize_actions", True)),
                                 bool(cfg.get("clip_actions", False)))
            # Each row's actions and extra outputs stay in the group's arrays (read when a
            # batch is built: agent_batches.py).
            acted = (extra, acts)
            same = to_env is acts
            for j, (ep, aid, obs, action) in enumerate(zip(members, aids, obs_list, list(acts))):
                step = ep.open[aid] = [obs, action, acted, j, ep.length, 0.0]  # see _OBS.._REWARD
                if recurrent:
                    ep.memory[aid] = ([s[j] for s in state_out], step)
                last = ep._last_action
                ep._prev_action[aid] = last.get(aid)
                last[aid] = action
                ep._last_extra[aid] = (extra, j)
                actions[ep.env_index][aid] = action if same else to_env[j]
        t1 = clock()
        env_wait = 0.0
        envs = self.env.envs
        process = self._process
        for i, ep in enumerate(episodes):
            if not actions[i] and not ep.open:
                raise ValueError(f"Sub-env {i} ({type(envs[i]).__name__}) gave no agent an "
                                 "observation, yet its episode is not over (set terminateds['__all__'])")
            s = clock()
            try:
                result = envs[i].step(actions[i])
            except Exception as e:
                raise self._located(env_call_error("step()", e), ep, ep.length + 1) from e
            env_wait += clock() - s
            if not (type(result) is tuple and len(result) == 5):
                if not (isinstance(result, tuple) and len(result) == 5):
                    raise self._located(EnvCheckError(
                        f"the env's step() returned {_what(result)}; multi-agent envs return (obs, rewards, "
                        "terminateds, truncateds, infos) dicts"), ep, ep.length + 1)
            process(i, ep, *result)
        self.steps_since_sync += self.num_envs
        perf = self._perf
        perf["inference"] += t1 - t0
        perf["env_wait"] += env_wait
        perf["processing"] += clock() - t1 - env_wait
        perf["steps"] += 1
        return self.num_envs

    def _finish_actors(self) -> None:
        """The deferred columns of the rows acted on so far (see `PolicyActors.finish`)."""
        self._actors.finish()

    def _user_code_ran(self) -> None:
        """A callback or `observation_fn` ran: it may have changed the worker's policies."""
        self._use_cache = {}

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

    def _checked_obs(self, ep: MultiAgentEpisode, aid, pid: str, pp, check: ObsRowCheck, raw) -> np.ndarray:
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
        if self._step_checks and not check.ok(obs):
            self._explain(ep, aid, pid, pp, check, raw)
        return obs

    def _explain(self, ep: MultiAgentEpisode, aid, pid: str, pp, check: ObsRowCheck, raw) -> None:
        """Raises the EnvCheckError for an observation whose vectorised check failed (or
        stops checking a preprocessor whose outputs leave its own space)."""
        problem = observation_problem(raw, pp.original_space)
        if problem is not None:
            raise self._located(EnvCheckError(f"{problem} (policy {pid!r})"), ep, ep.length, aid)
        # The env is not at fault: the preprocessor's outputs leave the space it
        # declares (a custom preprocessor). Say so once and stop checking them.
        logger.warning("The outputs of preprocessor %s (policy %r) leave its observation_space %s, "
                       "though the observations are in their space; not checking them any more",
                       pp, pid, pp.observation_space)
        check.trivial = True

    # --- observations and transitions -------------------------------------------------
    def _observe(self, ep: MultiAgentEpisode, obs: Dict[Any, Any], infos: Dict[Any, Any]) -> Dict[Any, Any]:
        """observation_fn, then each agent's policy's preprocessor and filter."""
        if self.settings.observation_fn is not None and obs:
            obs = self.settings.observation_fn(agent_obs=obs, worker=self.worker, base_env=self.env,
                                               policies=self.worker.policy_map, episode=ep)
            self._user_code_ran()
        out = {}
        mapped, raw_obs, last_info = ep._policy, ep._last_raw_obs, ep._last_info
        uses, checked = self._use_cache, self._checked
        step_checks = self._step_checks
        detailed = self._detailed_checks
        for aid, raw in obs.items():
            pid = mapped.get(aid)
            if pid is None:
                pid = ep.policy_for(aid)
            use = uses.get(pid)
            if use is None:
                use = self._uses(pid)
            pp, filt, check, direct = use
            if detailed or pid not in checked:
                x = filt(self._checked_obs(ep, aid, pid, pp, check, raw))
            elif direct and type(raw) is np.ndarray and raw.dtype == _FLOAT32:
                # The common case: `_checked_obs` and the filter leave it as it is.
                if step_checks and not check.ok(raw):
                    self._explain(ep, aid, pid, pp, check, raw)
                x = raw
            else:  # `_checked_obs` after the first episode, inlined
                try:
                    x = pp.transform(raw)
                except Exception:
                    x = self._checked_obs(ep, aid, pid, pp, check, raw)  # raises, explaining
                if step_checks and not check.ok(x):
                    self._explain(ep, aid, pid, pp, check, raw)
                x = filt(x)
            out[aid] = x
            raw_obs[aid] = raw
            last_info[aid] = infos.get(aid, {})
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
        for policy in self.worker.policy_map.in_memory_policies():
            # An exploration that acts per episode (ParameterNoise) hears of each start, as the reference's.
            start = policy.exploration.bound_hook("on_episode_start")
            if start is not None:
                start()
        if self._hooks["on_episode_start"]:
            self.callbacks.on_episode_start(worker=self.worker, base_env=self.env, policies=self.worker.policy_map,
                                            episode=ep, env_index=i)
            self._user_code_ran()

    def _process(self, i: int, ep: MultiAgentEpisode, obs, rewards, terminateds, truncateds, infos) -> None:
        ep.length += 1
        term_all, trunc_all = bool(terminateds.get(ALL, False)), bool(truncateds.get(ALL, False))
        rules = self._rules
        end = rules.end(term_all, trunc_all, ep.length)
        over = end.over
        # A horizon that ends the episode as terminal (soft horizon) makes every agent's end terminal.
        horizon_terminal = over and not (term_all or trunc_all) and end.terminal
        seen = self._observe(ep, obs, infos)
        clipper = self._clipper
        check_rewards = self._step_checks
        open_, mapped = ep.open, ep._policy
        last_reward, prev_reward, agent_rewards = ep._last_reward, ep._prev_reward, ep.agent_rewards
        for aid, r in rewards.items():
            try:
                r = float(r)
            except (TypeError, ValueError):
                raise self._located(EnvCheckError(reward_problem(r)), ep, ep.length, aid) from None
            if check_rewards and not _isfinite(r):
                raise self._located(EnvCheckError(reward_problem(r)), ep, ep.length, aid)
            pid = mapped.get(aid)
            key = (aid, pid if pid is not None else ep.policy_for(aid))
            agent_rewards[key] = agent_rewards.get(key, 0.0) + r
            ep.total_reward += r
            prev_reward[aid] = last_reward.get(aid, 0.0)
            last_reward[aid] = r
            step = open_.get(aid)
            if step is not None:
                step[_REWARD] += float(clipper(np.float64(r))) if clipper is not None else r
        if over or (len(mapped) - len(ep.rows) > 1 and _first_rows(ep)):
            # Their first closes make `ep.rows`' order, hence the batches': so the agents go in
            # the order the env's dicts give them, never a set's (a set of string ids iterates
            # in an order that changes with PYTHONHASHSEED, so a seeded run would not repeat
            # from one process to the next).
            agents = dict.fromkeys(seen)
            agents.update((a, None) for a in terminateds if a != ALL)
            agents.update((a, None) for a in truncateds if a != ALL)
            if over:
                agents.update(dict.fromkeys(open_))
        else:  # at most one agent's first row: any order makes the same rows
            agents = seen.keys() | terminateds.keys() | truncateds.keys()
            agents.discard(ALL)
        terminal = rules.terminal
        rows, done_agents = ep.rows, ep.done_agents
        last_obs, last_term, last_trunc = ep._last_obs, ep._last_terminated, ep._last_truncated
        t_get, tr_get = terminateds.get, truncateds.get
        for aid in agents:
            term = bool(t_get(aid, False)) or term_all or horizon_terminal
            done = term or bool(tr_get(aid, False)) or over
            if term:
                term = terminal(term)
            last_term[aid], last_trunc[aid] = term, done and not term
            fresh = aid in seen
            if fresh:
                last_obs[aid] = seen[aid]
            if (fresh or done) and aid in open_:
                step = open_.pop(aid)
                agent_rows = rows.get(aid)
                if agent_rows is None:
                    agent_rows = rows[aid] = []
                # One row: obs, new_obs, action, reward, terminated, done, t, acted, j.
                agent_rows.append((step[_OBS], last_obs[aid], step[_ACTION], step[_REWARD], term, done, step[_T],
                                   step[_ACTED], step[_J]))
                ep.num_rows += 1
            if done:
                done_agents.add(aid)
        if self._step_hook:
            self.callbacks.on_episode_step(worker=self.worker, base_env=self.env, episode=ep, env_index=i)
            self._user_code_ran()
        if over:
            self._end_episode(i, ep)
            if not end.reset:
                # The env goes on: the next episode starts from the current observations.
                self._start_episode(i, seen, infos, carried=ep)

    def _end_episode(self, i: int, ep: MultiAgentEpisode) -> None:
        if self._hooks["on_episode_end"]:
            self.callbacks.on_episode_end(worker=self.worker, base_env=self.env, policies=self.worker.policy_map,
                                          episode=ep, env_index=i)
            self._user_code_ran()
        self.metrics.append(ep.to_metrics())
        self._episodes[i] = None
        if self._detailed_checks:  # the first episode is checked: from now on, vectorised checks
            self._detailed_checks = False
            self._step_checks = self.settings.check_env_steps
        if ep.num_rows:
            self._finished.append(ep)

    # --- batches -------------------------------------------------------------------------
    def _build(self, episodes: List[MultiAgentEpisode], env_steps: int) -> MultiAgentBatch:
        hook = self.callbacks if self._hooks["on_postprocess_trajectory"] else None
        batches = postprocessed_batches(episodes, self.worker, lambda pid: self._resolve(pid)[0], hook)
        built = {id(e) for e in episodes}
        self._finished = [e for e in self._finished if id(e) not in built]
        if self.settings.compress_observations:
            # After postprocessing (bootstrapping reads `new_obs`); the learner decompresses.
            for batch in batches.values():
                compress_columns(batch)
        return MultiAgentBatch(batches, env_steps)


def _first_rows(ep: MultiAgentEpisode) -> bool:
    """Whether this step may close the first rows of two or more agents (since the last batch)."""
    rows = ep.rows
    new = 0
    for aid in ep.open:
        if aid not in rows:
            new += 1
            if new > 1:
                return True
    return False


def _what(result: Any) -> str:
    return f"a tuple of {len(result)}" if isinstance(result, tuple) else f"a {type(result).__name__}"
