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

Env checks (`rlfleet.env.checks`), per agent: the observations as
rollout/multi_agent_observations.py says, and a finite-reward check of each reward (none
after the first episode with `disable_env_checking`). An env that raises or breaks its
contract is an `EnvError` naming the env, worker, sub-env, episode, step and agent; the
sampler then stops (later collections raise it again) until `restart()`.

Cost (the sampler's own, per agent step): a few dict operations; closed transitions become
batches in rollout/agent_batches.py; the observations' costs are in
rollout/multi_agent_observations.py. Acting (rollout/policy_actors.py) runs with
single-threaded BLAS, as on the single-agent path (`rlfleet.fast.blas.single_threaded_blas`).
"""
from __future__ import annotations

import math
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.env.checks import EnvCheckError, env_call_error, reward_problem
from rlfleet.env.multi_agent_env import ALL, MultiAgentVectorEnv
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.agent_batches import postprocessed_batches, stack_obs
from rlfleet.rollout.agent_memory import recurrent_columns, recurrent_inputs
from rlfleet.rollout.policy_actors import PolicyActors
from rlfleet.rollout.policy_removal import remap_removed_policy
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.multi_agent_episode import STEP_ACTED as _ACTED, STEP_ACTION as _ACTION, STEP_J as _J
from rlfleet.rollout.multi_agent_episode import STEP_OBS as _OBS, STEP_REWARD as _REWARD, STEP_T as _T
from rlfleet.rollout.multi_agent_observations import MultiAgentObservations, _what
from rlfleet.rollout.policy_mapping import call_mapping_fn
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.spaces import env_actions

SB = SampleBatch
_isfinite = math.isfinite


class MultiAgentSampler(MultiAgentObservations):
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
        super().__init__(settings, worker, vector_env)
        self.callbacks = callbacks
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
        self._episodes: List[Optional[MultiAgentEpisode]] = [None] * self.num_envs
        self._finished: List[MultiAgentEpisode] = []  # ended, rows not yet batched

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

    def restart(self) -> None:
        """Forgets the episodes in flight (and an env failure); the next step resets every sub-env."""
        self._forget()
        self._actors.clear()
        self._episodes = [None] * self.num_envs
        self._finished = []

    def on_policy_removed(self, policy_id: str) -> None:
        """Called after the worker removed `policy_id` (and set its new mapping function): its
        agents are re-mapped and what they collected is dropped (see policy_removal.py)."""
        self._checked.discard(policy_id)
        remap_removed_policy(policy_id, self._finished, [ep for ep in self._episodes if ep is not None], self.worker)

    # --- one env step for every sub-env -----------------------------------------------
    def _step(self) -> int:
        self._raise_if_failed()
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
            # An exploration that acts per episode (ParameterNoise) hears of each start, as in RLlib 1.x.
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

