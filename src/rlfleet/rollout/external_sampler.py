"""ExternalEnvSampler: the `Sampler` of a worker whose env is an `ExternalEnv` (or
`ExternalMultiAgentEnv`): it serves the env's own thread instead of stepping an env.

The env's calls arrive as events in the order they were made (env/external_env.py). Each
pass (`_pump`) waits for one event, takes every other one already queued, applies them, and
answers all the `get_action` calls among them with one forward pass per policy. Steps are
kept per agent exactly as on the multi-agent path (`MultiAgentEpisode.rows`: an agent's step
closes when its next observation or the episode's end arrives), so batches are built and
postprocessed by the same code (rollout/agent_batches.py) and are `MultiAgentBatch`es, one
`SampleBatch` per policy (a single-agent ExternalEnv: the one policy's), counted in env steps
(one `get_action` / `log_action` call is one env step).

Batch size: `rollout_fragment_length` env steps, or (`complete_episodes`) finished episodes
totalling at least that. Episodes started with `training_enabled=False` leave metrics, never
samples. `log_action` steps carry the logged action, with the policy's extra outputs for that
observation (value predictions) and, where the policy has them, the log-likelihood of the
logged action under its action distribution.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.env.external_env import ExternalEnv
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.agent_batches import postprocessed_batches, stack_obs
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.policy_mapping import call_mapping_fn
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.rollout.sampler_bookkeeping import SamplerBookkeeping
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.spaces import env_actions

SB = SampleBatch
# How long one wait for the env's next call lasts before the env thread's health is checked.
_POLL_S = 0.2
# An agent's open step, as in MultiAgentSampler: obs, action, (extra outputs, actions), row j, t, reward.
_OBS, _ACTION, _ACTED, _J, _T, _REWARD = range(6)


class ExternalEnvStopped(RuntimeError):
    """The external env's `run()` returned or raised while the sampler waited for experience."""


class _Live:
    """One running episode: its MultiAgentEpisode and whether it is learned from."""

    __slots__ = ("episode", "training_enabled")

    def __init__(self, episode: MultiAgentEpisode, training_enabled: bool):
        self.episode = episode
        self.training_enabled = training_enabled


class ExternalEnvSampler(SamplerBookkeeping):
    """Collects MultiAgentBatches from an ExternalEnv's thread (see the module docstring).

    Args:
        worker: the owning RolloutWorker (policies, preprocessors, filters, mapping).
        env: the ExternalEnv.
        callbacks: the DefaultCallbacks instance (episode start / end, postprocessing).
        settings: the per-run settings.
    """

    def __init__(self, *, worker, env: ExternalEnv, callbacks, settings: SamplerSettings):
        if settings.rules.horizon:
            raise ValueError(f"'horizon': {settings.rules.horizon} cannot end the episodes of an ExternalEnv "
                             f"({type(env).__name__}): its run() ends them; set 'horizon': None and call "
                             "end_episode(..., truncated=True) at your time limit")
        super().__init__(settings)
        self.worker = worker
        self.env = env
        self.callbacks = callbacks
        self._live: Dict[str, _Live] = {}
        self._finished: List[MultiAgentEpisode] = []
        self._ended_ids: List[str] = []  # the env's ids of the episodes ended since the last batch
        # The env's ids of the episodes that ended before the last batch was built and after the
        # one before (their rows are in it or in earlier batches; those not learned from have
        # none): what a policy server confirms to its clients as trained.
        self.last_batch_episode_ids: List[str] = []
        self._hooks = {name: callbacks.overrides(name)
                       for name in ("on_episode_start", "on_episode_end", "on_postprocess_trajectory")}

    # --- Sampler -----------------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:
        self.env.start()
        target = self.settings.fragment_length
        env_steps = 0
        while True:
            env_steps += self._pump()
            if self.settings.complete_episodes:
                if sum(e.length for e in self._finished) >= target:
                    return self._build(self._finished, sum(e.length for e in self._finished))
            elif env_steps >= target:
                live = [x.episode for x in self._live.values() if x.training_enabled and x.episode.num_rows]
                return self._build(self._finished + live, env_steps)

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Serves the env until `num_episodes` more episodes end; their metrics (no samples)."""
        self.env.start()
        start = len(self.metrics)
        while len(self.metrics) - start < num_episodes:
            self._pump()
            self._drop_rows()
        return self.metrics[start:]

    def restart(self) -> None:
        """Drops what was collected; the episodes in flight go on (the simulator owns them)."""
        self._drop_rows()
        self._forget()

    # --- events ------------------------------------------------------------------------------
    def _pump(self) -> int:
        """Applies the next events (waiting for at least one); returns the env steps they made."""
        clock = time.perf_counter
        t0 = clock()
        event = self.env.next_event(_POLL_S)
        while event is None:
            self._check_env_alive()
            event = self.env.next_event(_POLL_S)
        t1 = clock()
        steps = 0
        pending: List[tuple] = []  # (live, agent, obs, logged action or None, answer dict or None)
        replies: List[Tuple[Any, Dict[Any, Any]]] = []  # (reply queue, {agent: action})
        waiting: set = set()  # episodes with a step in `pending`
        while event is not None:
            kind, eid = event[0], event[1]
            if eid in waiting:
                # A logged step does not wait for its answer: the env may have gone on with the
                # episode. Its step opens (acting) before anything later in it applies.
                self._act(pending)
                pending, waiting = [], set()
            if kind == "start":
                self._start(eid, event[2])
            elif kind == "act":
                steps += 1
                live = self._live[eid]
                live.episode.length += 1
                logged_actions = event[4] or {}
                answer: Optional[Dict[Any, Any]] = None
                if event[3] is not None:  # get_action: answered once the actions are computed
                    answer = {}
                    replies.append((event[3], answer))
                for aid, raw in event[2].items():
                    obs = self._observe(live.episode, aid, raw)
                    self._close(live.episode, aid, obs, terminated=False, done=False)
                    pending.append((live, aid, obs, logged_actions.get(aid), answer))
                waiting.add(eid)
            elif kind == "rewards":
                self._reward(self._live[eid].episode, event[2])
            elif kind == "end":
                self._end(eid, event[2], event[3])
            event = self.env.next_event(None)
        t2 = clock()
        if pending:
            self._act(pending)
        for reply, actions in replies:
            reply.put(actions)
        self.steps_since_sync += steps
        perf = self._perf
        perf["env_wait"] += t1 - t0
        perf["processing"] += t2 - t1
        perf["inference"] += clock() - t2
        perf["steps"] += steps
        return steps

    def _check_env_alive(self) -> None:
        env = self.env
        if env.error is not None:
            raise ExternalEnvStopped(f"{type(env).__name__}.run() raised {type(env.error).__name__}: "
                                     f"{env.error}") from env.error
        if not env.is_alive():
            raise ExternalEnvStopped(f"{type(env).__name__}.run() returned: no more experience will come "
                                     "(keep run() looping for as long as the trainer samples)")

    def _start(self, eid: str, training_enabled: bool) -> None:
        self._eps_counter += 1
        fn, worker = self.worker.policy_mapping_fn, self.worker
        episode = MultiAgentEpisode(self._eps_base + self._eps_counter, 0,
                                    lambda aid, ep: call_mapping_fn(fn, aid, ep, worker))
        self._live[eid] = _Live(episode, training_enabled)
        if self._hooks["on_episode_start"]:
            self.callbacks.on_episode_start(worker=worker, base_env=self.env, policies=worker.policy_map,
                                            episode=episode, env_index=0)

    def _observe(self, ep: MultiAgentEpisode, aid: Any, raw: Any) -> np.ndarray:
        pid = ep.policy_for(aid)
        pp, filt = self.worker.preprocessors[pid], self.worker.filters[pid]
        obs = filt(pp.transform(raw))
        ep._last_obs[aid] = obs
        ep._last_raw_obs[aid] = raw
        return obs

    def _close(self, ep: MultiAgentEpisode, aid: Any, new_obs: np.ndarray, *, terminated: bool, done: bool) -> None:
        """Closes the agent's open step (if any) into a row ending in `new_obs`."""
        step = ep.open.pop(aid, None)
        if step is None:
            return
        ep.rows.setdefault(aid, []).append((step[_OBS], new_obs, step[_ACTION], step[_REWARD], terminated, done,
                                            step[_T], step[_ACTED], step[_J]))
        ep.num_rows += 1

    def _reward(self, ep: MultiAgentEpisode, rewards: Dict[Any, float]) -> None:
        clipper = self.settings.reward_clipper
        for aid, r in rewards.items():
            key = (aid, ep.policy_for(aid))
            ep.agent_rewards[key] = ep.agent_rewards.get(key, 0.0) + r
            ep.total_reward += r
            ep._prev_reward[aid] = ep._last_reward.get(aid, 0.0)
            ep._last_reward[aid] = r
            step = ep.open.get(aid)
            if step is not None:
                step[_REWARD] += float(clipper(np.float64(r))) if clipper is not None else r

    def _end(self, eid: str, obs: Dict[Any, Any], truncated: bool) -> None:
        live = self._live.pop(eid)
        ep = live.episode
        for aid in list(ep.open):
            new_obs = self._observe(ep, aid, obs[aid]) if aid in obs else ep.open[aid][_OBS]
            self._close(ep, aid, new_obs, terminated=not truncated, done=True)
            ep._last_terminated[aid], ep._last_truncated[aid] = not truncated, truncated
        if self._hooks["on_episode_end"]:
            self.callbacks.on_episode_end(worker=self.worker, base_env=self.env, policies=self.worker.policy_map,
                                          episode=ep, env_index=0)
        self.metrics.append(ep.to_metrics())
        if live.training_enabled and ep.num_rows:
            self._finished.append(ep)
        self._ended_ids.append(eid)

    # --- acting ------------------------------------------------------------------------------
    def _act(self, pending: List[tuple]) -> None:
        """One forward pass per policy for every step in `pending`; opens each agent's step and
        fills the replies of `get_action` calls."""
        groups: Dict[str, List[tuple]] = {}
        for item in pending:
            groups.setdefault(item[0].episode.policy_for(item[1]), []).append(item)
        for pid, items in groups.items():
            policy = self.worker.policy_map[pid]
            obs = stack_obs([item[2] for item in items])
            acts, _, extra = policy.compute_actions(obs, timestep=policy.global_timestep + self.steps_since_sync)
            extra = dict(extra)
            logged = [j for j, item in enumerate(items) if item[3] is not None]
            if logged:
                acts = np.array(acts, copy=True)
                for j in logged:
                    acts[j] = np.asarray(items[j][3], dtype=acts.dtype)
                _relikelihood(policy, extra, acts, logged)
            cfg = policy.config
            to_env = env_actions(acts, policy.action_space, bool(cfg.get("normalize_actions", True)),
                                 bool(cfg.get("clip_actions", False)))
            acted = (extra, acts)
            for j, (live, aid, o, _, reply) in enumerate(items):
                ep = live.episode
                ep.open[aid] = [o, acts[j], acted, j, ep.length - 1, 0.0]
                ep._prev_action[aid] = ep._last_action.get(aid)
                ep._last_action[aid] = acts[j]
                ep._last_extra[aid] = (extra, j)
                if reply is not None:
                    reply[aid] = to_env[j]

    # --- batches -----------------------------------------------------------------------------
    def _drop_rows(self) -> None:
        self._finished, self._ended_ids = [], []
        for live in self._live.values():
            live.episode.rows, live.episode.num_rows = {}, 0

    def _build(self, episodes: List[MultiAgentEpisode], env_steps: int) -> MultiAgentBatch:
        hook = self.callbacks if self._hooks["on_postprocess_trajectory"] else None
        batches = postprocessed_batches(episodes, self.worker, lambda pid: self.worker.policy_map[pid], hook)
        self.last_batch_episode_ids, self._finished, self._ended_ids = self._ended_ids, [], []
        for live in self._live.values():  # disabled episodes' rows are never learned from
            if not live.training_enabled:
                live.episode.rows, live.episode.num_rows = {}, 0
        if self.settings.compress_observations:
            for batch in batches.values():
                compress_columns(batch)
        return MultiAgentBatch(batches, env_steps)


def _relikelihood(policy, extra: Dict[str, np.ndarray], acts: np.ndarray, rows: List[int]) -> None:
    """The log-likelihood (and probability) of logged actions under the policy's action
    distribution, where the policy records one (`action_logp` and `action_dist_inputs`)."""
    import torch  # only here: the rollout layer leaves importing torch to the policies

    from rlfleet.policy.torch_policy import TorchPolicy

    if SB.ACTION_LOGP not in extra or SB.ACTION_DIST_INPUTS not in extra or not isinstance(policy, TorchPolicy):
        return

    with torch.inference_mode():
        dist = policy.dist_class(torch.as_tensor(extra[SB.ACTION_DIST_INPUTS][rows]), policy.model)
        logp = dist.logp(torch.as_tensor(acts[rows])).numpy().astype(np.float32)
    extra[SB.ACTION_LOGP] = np.array(extra[SB.ACTION_LOGP], copy=True)
    extra[SB.ACTION_LOGP][rows] = logp
    if SB.ACTION_PROB in extra:
        extra[SB.ACTION_PROB] = np.array(extra[SB.ACTION_PROB], copy=True)
        extra[SB.ACTION_PROB][rows] = np.exp(logp)


__all__ = ["ExternalEnvSampler", "ExternalEnvStopped"]
