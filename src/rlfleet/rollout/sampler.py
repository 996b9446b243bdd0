"""The single-agent fast path: a vector of envs, one batched forward pass per step.

Everything a step writes goes into preallocated time-major arrays `[T, num_envs, ...]`;
a finished chunk is turned into one env-major SampleBatch (each sub-env's steps
contiguous) and postprocessed by the policy in one vectorised call.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.vector_env import VectorEnv
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.episode import Episode, RolloutMetrics
from rlfleet.rollout.metrics import summarize_perf
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.spaces import action_layout, env_actions

SB = SampleBatch


def _action_layout(space: gym.Space):
    # Flat rows per step (Dict / Tuple actions too); `env_actions` rebuilds the env's structure.
    try:
        return action_layout(space)
    except ValueError:
        raise ValueError(f"The single-agent sampler does not support action space {space}") from None


class SingleAgentSampler:
    """Collects fragments or complete episodes from a VectorEnv with one policy.

    Args:
        worker: the owning RolloutWorker (passed to callbacks).
        vector_env: the sub-envs.
        policy: the acting policy.
        preprocessor: flattens raw observations.
        obs_filter: normalises preprocessed observations (updated while sampling).
        callbacks: the DefaultCallbacks instance.
        settings: the per-run settings (see `SamplerSettings`).
    """

    def __init__(self, *, worker, vector_env: VectorEnv, policy, preprocessor, obs_filter, callbacks,
                 settings: SamplerSettings):
        self.worker = worker
        self.env = vector_env
        self.policy = policy
        self.preprocessor = preprocessor
        self.filter = obs_filter
        self.callbacks = callbacks
        self.settings = settings
        self.num_envs = vector_env.num_envs
        self.action_space = vector_env.action_space
        self._act_shape, self._act_dtype = _action_layout(self.action_space)
        self._hooks = {
            name: callbacks.overrides(name)
            for name in ("on_episode_start", "on_episode_step", "on_episode_end", "on_postprocess_trajectory")
        }
        # Recurrent policies: per-env state carried from step to step (reset at episode
        # starts), recorded with the previous action / reward as `state_in_k`,
        # `state_out_k`, `prev_actions`, `prev_rewards` on every row (see _act_recurrent).
        self._recurrent = policy.is_recurrent()
        self._state: List[np.ndarray] = []

        n = self.num_envs
        self._eps_counter = 0
        self._eps_base = settings.episode_id_base
        self._cur_obs: Optional[np.ndarray] = None
        self._eps_id = np.zeros(n, dtype=np.int64)
        self._ep_len = np.zeros(n, dtype=np.int64)
        self._ep_ret = np.zeros(n, dtype=np.float64)
        self._episodes: List[Optional[Episode]] = [None] * n
        self._pending: List[List[SampleBatch]] = [[] for _ in range(n)]
        self._buffers: Dict[str, np.ndarray] = {}
        self._chunk_len = self.settings.fragment_length
        self.steps_since_sync = 0
        self.metrics: List[RolloutMetrics] = []
        self._perf = {"env_wait": 0.0, "inference": 0.0, "processing": 0.0, "steps": 0}

    # --- public ------------------------------------------------------------------
    def sample(self) -> SampleBatch:
        """A fragment of `rollout_fragment_length * num_envs` steps (truncate_episodes), or
        complete episodes totalling at least that many steps (complete_episodes)."""
        if not self.settings.complete_episodes:
            rows = self._collect(lambda: False)
            return self._postprocess(self._chunk_to_batch(rows))
        target = self.settings.fragment_length * self.num_envs
        done_steps = [0]
        out: List[SampleBatch] = []
        while done_steps[0] < target:
            rows = self._collect(lambda: done_steps[0] + self._finished_steps >= target)
            finished = self._split_complete(self._chunk_to_batch(rows))
            done_steps[0] += finished.count
            out.append(finished)
        return self._postprocess(SampleBatch.concat_samples(out))

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs until `num_episodes` more episodes finish; returns their metrics rows.

        The samples themselves are dropped (evaluation needs only the metrics).
        """
        start = len(self.metrics)
        while len(self.metrics) - start < num_episodes:
            rows = self._collect(lambda: len(self.metrics) - start >= num_episodes)
            if self.settings.complete_episodes:
                self._split_complete(self._chunk_to_batch(rows))
        return self.metrics[start:]

    def get_state(self) -> Dict[str, Any]:
        # Episode ids keep counting across a checkpoint restore (they key offline data).
        return {"episodes_started": int(self._eps_counter)}

    def set_state(self, state: Dict[str, Any]) -> None:
        self._eps_counter = int(state.get("episodes_started", self._eps_counter))

    def restart(self) -> None:
        """Forgets the episodes in flight; the next collection resets every sub-env."""
        self._cur_obs = None
        self._pending = [[] for _ in range(self.num_envs)]
        self._episodes = [None] * self.num_envs
        self.metrics = []
        self.steps_since_sync = 0

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self.metrics = self.metrics, []
        return out

    def perf_stats(self) -> Dict[str, float]:
        return summarize_perf(self._perf)

    # --- the step loop -------------------------------------------------------------
    def _start(self) -> None:
        raw = self.env.reset_all()
        # Catch observations that do not match the declared space here, with a clear
        # message, rather than as a shape error deep inside NumPy.
        self.preprocessor.check(raw[0])
        self._cur_obs = self._filter(raw)
        if self._recurrent:
            n = self.num_envs
            self._state = [np.repeat(s[None], n, axis=0) for s in self.policy.get_initial_state()]
            self._prev_actions = np.zeros((n, *self._act_shape), self._act_dtype)
            self._prev_rewards = np.zeros(n, np.float32)
        for i in range(self.num_envs):
            self._new_episode(i, raw[i])

    def _filter(self, raw_obs: List) -> np.ndarray:
        return self.filter.apply_batch(self.preprocessor.transform_batch(raw_obs))

    def _alloc(self, extra: Dict[str, np.ndarray]) -> None:
        T, n = self._chunk_len, self.num_envs
        obs_shape = self._cur_obs.shape[1:]
        # uint8 images stay uint8 (4x smaller); the model scales them.
        obs_dtype = np.uint8 if self._cur_obs.dtype == np.uint8 else np.float32
        b = {
            SB.OBS: np.zeros((T, n, *obs_shape), obs_dtype),
            SB.NEXT_OBS: np.zeros((T, n, *obs_shape), obs_dtype),
            SB.ACTIONS: np.zeros((T, n, *self._act_shape), self._act_dtype),
            SB.REWARDS: np.zeros((T, n), np.float32),
            SB.TERMINATEDS: np.zeros((T, n), bool),
            SB.DONES: np.zeros((T, n), bool),
            SB.EPS_ID: np.zeros((T, n), np.int64),
            SB.T: np.zeros((T, n), np.int64),
        }
        for key, value in extra.items():
            b[key] = np.zeros((T, n, *value.shape[1:]), value.dtype)
        self._buffers = b
        self._extra_keys = tuple(extra)

    def _collect(self, stop: Callable[[], bool]) -> int:
        """Steps all sub-envs up to one chunk; returns the number of rows written."""
        if self._cur_obs is None:
            self._start()
        self._finished_steps = 0
        policy, venv = self.policy, self.env
        explore, n = self.settings.explore, self.num_envs
        clipper = self.settings.reward_clipper
        normalize, clip = self.settings.normalize_actions, self.settings.clip_actions
        hooks = self._hooks
        perf = self._perf
        clock = time.perf_counter
        T = self._chunk_len
        rows = 0
        for t in range(T):
            t0 = clock()
            if self._recurrent:
                actions, extra = self._act_recurrent(explore)
            else:
                actions, _, extra = policy.compute_actions(
                    self._cur_obs, explore=explore, timestep=policy.global_timestep + self.steps_since_sync
                )
            t1 = clock()
            if not self._buffers:
                self._alloc(extra)
            b = self._buffers
            b[SB.OBS][t] = self._cur_obs
            b[SB.ACTIONS][t] = actions
            for key in self._extra_keys:
                b[key][t] = extra[key]
            b[SB.EPS_ID][t] = self._eps_id
            b[SB.T][t] = self._ep_len
            step = venv.step(env_actions(actions, self.action_space, normalize, clip))
            t2 = clock()
            rewards = step.rewards
            b[SB.REWARDS][t] = clipper(rewards) if clipper is not None else rewards
            if self._recurrent:
                self._prev_actions[:] = actions
                self._prev_rewards[:] = b[SB.REWARDS][t]
            b[SB.TERMINATEDS][t] = step.terminateds
            b[SB.DONES][t] = step.ends
            next_obs = self._filter(step.obs)
            b[SB.NEXT_OBS][t] = next_obs
            self._ep_len += 1
            self._ep_ret += rewards
            self.steps_since_sync += n
            if hooks["on_episode_step"]:
                self._episode_step(step, actions, next_obs)
            if step.reset_obs:
                for i, raw in step.reset_obs.items():
                    self._end_episode(i)
                    next_obs[i] = self.filter(self.preprocessor.transform(raw))
                    if self._recurrent:
                        self._reset_recurrent(i)
                    self._new_episode(i, raw)
            if self.settings.render:
                venv.render(0)
            self._cur_obs = next_obs
            rows = t + 1
            perf["inference"] += t1 - t0
            perf["env_wait"] += t2 - t1
            perf["processing"] += clock() - t2
            perf["steps"] += 1
            if stop():
                break
        return rows

    def _act_recurrent(self, explore: bool):
        """One batched step of a recurrent policy; the state and previous action / reward
        going in (and the state coming out) are added to the recorded columns."""
        policy = self.policy
        actions, state_out, extra = policy.compute_actions(
            self._cur_obs, self._state, self._prev_actions, self._prev_rewards,
            explore=explore, timestep=policy.global_timestep + self.steps_since_sync,
        )
        extra = dict(extra)
        extra[SB.PREV_ACTIONS] = self._prev_actions.copy()
        extra[SB.PREV_REWARDS] = self._prev_rewards.copy()
        for k, (s_in, s_out) in enumerate(zip(self._state, state_out)):
            extra[f"state_in_{k}"] = s_in
            extra[f"state_out_{k}"] = s_out
        self._state = [np.array(s, np.float32) for s in state_out]
        return actions, extra

    def _reset_recurrent(self, i: int) -> None:
        for s, init in zip(self._state, self.policy.get_initial_state()):
            s[i] = init
        self._prev_actions[i] = 0
        self._prev_rewards[i] = 0.0

    # --- episodes ----------------------------------------------------------------
    def _new_episode(self, i: int, raw_obs) -> None:
        self._eps_counter += 1
        self._eps_id[i] = self._eps_base + self._eps_counter
        self._ep_len[i] = 0
        self._ep_ret[i] = 0.0
        episode = Episode(int(self._eps_id[i]), i)
        episode._last_raw_obs = raw_obs
        self._episodes[i] = episode
        if self._hooks["on_episode_start"]:
            self.callbacks.on_episode_start(
                worker=self.worker, base_env=self.env, policies=self.worker.policy_map, episode=episode, env_index=i
            )

    def _episode_step(self, step, actions, next_obs) -> None:
        for i, episode in enumerate(self._episodes):
            episode.length = int(self._ep_len[i])
            episode.total_reward = float(self._ep_ret[i])
            episode._last_raw_obs = step.obs[i]
            episode._last_obs = next_obs[i]
            episode._last_action = actions[i]
            episode._last_info = step.infos[i]
            episode._last_reward = float(step.rewards[i])
            self.callbacks.on_episode_step(worker=self.worker, base_env=self.env, episode=episode, env_index=i)

    def _end_episode(self, i: int) -> None:
        episode = self._episodes[i]
        episode.length = int(self._ep_len[i])
        episode.total_reward = float(self._ep_ret[i])
        if self._hooks["on_episode_end"]:
            self.callbacks.on_episode_end(
                worker=self.worker, base_env=self.env, policies=self.worker.policy_map, episode=episode, env_index=i
            )
        self._finished_steps += episode.length
        self.metrics.append(episode.to_metrics())

    # --- chunk -> batch ------------------------------------------------------------
    def _chunk_to_batch(self, rows: int) -> SampleBatch:
        """Env-major copy of the first `rows` rows: sub-env 0's steps, then sub-env 1's, ..."""
        n = self.num_envs
        cols = {}
        for key, buf in self._buffers.items():
            part = buf[:rows]
            cols[key] = np.ascontiguousarray(part.swapaxes(0, 1)).reshape(n * rows, *part.shape[2:])
        cols[SB.ENV_ID] = np.repeat(np.arange(n, dtype=np.int64), rows)
        dones, terms = cols[SB.DONES], cols[SB.TERMINATEDS]
        cols[SB.TRUNCATEDS] = dones & ~terms
        return SampleBatch(cols)

    def _split_complete(self, chunk: SampleBatch) -> SampleBatch:
        """Keeps the finished episodes of a chunk; stashes each sub-env's unfinished tail."""
        rows = chunk.count // self.num_envs
        dones = chunk[SB.DONES]
        done_parts: List[SampleBatch] = []
        for i in range(self.num_envs):
            lo, hi = i * rows, (i + 1) * rows
            ended = np.flatnonzero(dones[lo:hi])
            if len(ended):
                cut = lo + int(ended[-1]) + 1
                done_parts.extend(self._pending[i])
                done_parts.append(chunk.slice(lo, cut))
                self._pending[i] = [chunk.slice(cut, hi)] if cut < hi else []
            elif hi > lo:
                self._pending[i].append(chunk.slice(lo, hi))
        return SampleBatch.concat_samples(done_parts)

    def _postprocess(self, batch: SampleBatch) -> SampleBatch:
        if batch.count == 0:
            return batch
        batch = self.policy.postprocess_trajectory(batch)
        # `state_out_k` served bootstrapping only; learning needs `state_in_k` alone.
        for key in [k for k in batch if k.startswith("state_out_")]:
            del batch[key]
        if self._hooks["on_postprocess_trajectory"]:
            pieces = batch.split_by_episode()
            for piece in pieces:
                self.callbacks.on_postprocess_trajectory(
                    worker=self.worker, episode=None, agent_id=0, policy_id=self.policy.policy_id,
                    policies=self.worker.policy_map, postprocessed_batch=piece, original_batches={},
                )
            batch = SampleBatch.concat_samples(pieces)
        if self.settings.compress_observations:
            # After postprocessing (bootstrapping reads `new_obs`); the learner decompresses.
            compress_columns(batch)
        return batch
