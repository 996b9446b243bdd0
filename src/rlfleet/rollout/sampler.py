"""The vectorised single-agent sampler: a vector of envs, one batched forward pass per step.

Everything a step writes goes into preallocated time-major arrays `[T, num_envs, ...]`
(rollout/chunk_buffers.py); a finished chunk is turned into one env-major SampleBatch (each
sub-env's steps contiguous) and postprocessed by the policy in one vectorised call. The
policy acts through one actor per chunk (`policy.actor`, policy/actor.py), whose `finish()`
fills in the columns it deferred.

What the envs return is checked as it arrives (rollout/single_agent_checks.py). An env that
raises or breaks its contract is an `EnvError` naming the env, worker, sub-env, episode and
step; the sampler then stops (every later collection raises it again, so a remote worker
counts as failed) until `restart()`.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.env.checks import EnvError, env_call_error
from rlfleet.env.gym_vector_env import GymVectorEnv
from rlfleet.env.vector_env import VectorEnv
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.chunk_buffers import action_layout_of, alloc_chunk, chunk_to_batch, split_complete
from rlfleet.rollout.episode import Episode, RolloutMetrics
from rlfleet.rollout.postprocessing import drop_state_outs, postprocess_for_learning
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.rollout.single_agent_episodes import SingleAgentEpisodes
from rlfleet.utils.compression import compress_columns
from rlfleet.utils.spaces import env_actions

SB = SampleBatch


class SingleAgentSampler(SingleAgentEpisodes):
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
        super().__init__(settings, vector_env, preprocessor, obs_filter)
        self.worker = worker
        self.env = vector_env
        self.policy = policy
        self.preprocessor = preprocessor
        self.filter = obs_filter
        self.callbacks = callbacks
        self.num_envs = vector_env.num_envs
        self.action_space = vector_env.action_space
        self._act_shape, self._act_dtype = action_layout_of(self.action_space)
        space = self.action_space
        # Sub-envs stepped one by one take Discrete actions as Python ints; a Gymnasium vector env the array.
        self._int_actions = (isinstance(space, gym.spaces.Discrete) and not int(space.start)
                             and not isinstance(vector_env, GymVectorEnv))
        self._hooks = {
            name: callbacks.overrides(name)
            for name in ("on_episode_start", "on_episode_step", "on_episode_end", "on_postprocess_trajectory")
        }
        # An exploration that acts per episode (ParameterNoise re-draws its weight noise) hears of
        # each episode start.
        self._exploration_episode_start = policy.exploration.bound_hook("on_episode_start")
        # No one needs an Episode object: episodes live in arrays only (rollout/single_agent_episodes.py).
        self._plain = self._exploration_episode_start is None and not any(
            self._hooks[name] for name in ("on_episode_start", "on_episode_step", "on_episode_end"))
        # Recurrent policies: per-env state carried from step to step (reset at episode
        # starts), recorded with the previous action / reward as `state_in_k`,
        # `state_out_k`, `prev_actions`, `prev_rewards` on every row (see _act_recurrent).
        self._recurrent = policy.is_recurrent()
        self._state: List[np.ndarray] = []

        n = self.num_envs
        self._cur_obs: Optional[np.ndarray] = None
        self._eps_id = np.zeros(n, dtype=np.int64)
        self._ep_len = np.zeros(n, dtype=np.int64)
        self._ep_ret = np.zeros(n, dtype=np.float64)
        self._episodes: List[Optional[Episode]] = [None] * n
        self._pending: List[List[SampleBatch]] = [[] for _ in range(n)]
        self._buffers: Dict[str, np.ndarray] = {}
        self._chunk_len = self.settings.fragment_length
        # The rows kept (bool [T, num_envs]; None: all): a vector env's reset steps are dropped.
        self._valid: Optional[np.ndarray] = None

    # --- public ------------------------------------------------------------------
    def sample(self) -> SampleBatch:
        """A fragment of `rollout_fragment_length * num_envs` steps (truncate_episodes), or
        complete episodes totalling at least that many steps (complete_episodes)."""
        target = self.settings.fragment_length * self.num_envs
        if not self.settings.complete_episodes:
            batch = self._postprocess(self._chunk_to_batch(self._collect(lambda: False)))
            pieces = [batch]
            # A vector env's reset steps were dropped (NEXT_STEP autoreset): top the fragment up
            # with a short chunk of its own (each chunk is postprocessed as a fragment).
            while sum(p.count for p in pieces) < target:
                missing = target - sum(p.count for p in pieces)
                pieces.append(self._postprocess(self._chunk_to_batch(
                    self._collect(lambda: self._kept_rows >= missing))))
            return pieces[0] if len(pieces) == 1 else SampleBatch.concat_samples(pieces)
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

    def restart(self) -> None:
        """Forgets the episodes in flight (and an env failure); the next collection resets
        every sub-env."""
        self._forget()
        self._cur_obs = None
        self._pending = [[] for _ in range(self.num_envs)]
        self._episodes = [None] * self.num_envs

    # --- the step loop -------------------------------------------------------------
    def _start(self) -> None:
        try:
            raw = self.env.reset_all()
        except EnvError as e:
            raise self._located(e) from e.__cause__
        except Exception as e:  # e.g. a remote sub-env's error, arriving through Ray
            raise self._located(env_call_error("reset()", e)) from e
        # Observations that do not match the declared space fail here, saying which and
        # why, rather than as a shape error deep inside NumPy.
        first = [0] * self.num_envs
        self._check_each(raw, range(self.num_envs), first)
        self._cur_obs = self.filter.apply_batch(self._transform(raw, first))
        if self._recurrent:
            n = self.num_envs
            self._state = [np.repeat(s[None], n, axis=0) for s in self.policy.get_initial_state()]
            self._prev_actions = np.zeros((n, *self._act_shape), self._act_dtype)
            self._prev_rewards = np.zeros(n, np.float32)
        for i in range(self.num_envs):
            self._new_episode(i, raw[i])

    def _alloc(self, extra: Dict[str, np.ndarray], deferred: Tuple[str, ...]) -> None:
        self._buffers = alloc_chunk(self._chunk_len, self.num_envs, self._cur_obs, (self._act_shape, self._act_dtype),
                                    extra, deferred, self.settings.record_infos)
        self._obs_rows = list(self._buffers[SB.OBS])  # a view of each step's row, made once

    def _collect(self, stop: Callable[[], bool]) -> int:
        """Steps all sub-envs up to one chunk; returns the number of rows written."""
        with single_threaded_blas():  # small products: see fast/blas.py
            return self._collect_chunk(stop)

    def _collect_chunk(self, stop: Callable[[], bool]) -> int:
        self._raise_if_failed()
        if self._cur_obs is None:
            self._start()
        self._finished_steps = 0
        self._kept_rows = 0  # rows of this chunk that are transitions
        if self._valid is not None:  # (a chunk that failed part-way may have left rows marked)
            self._valid[:] = True
        policy, venv = self.policy, self.env
        explore, n = self.settings.explore, self.num_envs
        clipper = self.settings.reward_clipper
        normalize, clip = self.settings.normalize_actions, self.settings.clip_actions
        action_space = self.action_space
        int_actions = self._int_actions
        hooks = self._hooks
        step_hook = hooks["on_episode_step"]
        render = self.settings.render
        obs_filter = self.filter
        perf = self._perf
        clock = time.perf_counter
        T = self._chunk_len
        # One actor per chunk (policy/actor.py): with the NumPy backend (a feed-forward MLP
        # policy) per step only the actions; the log-likelihoods and values of the whole chunk
        # come from `finish()` in one vectorised pass at its end.
        actor = policy.actor(explore, policy.global_timestep + self.steps_since_sync, steps=T, num_envs=n)
        recurrent = self._recurrent
        rows = 0
        inference = env_wait = processing = 0.0
        b: Dict[str, np.ndarray] = self._buffers
        for t in range(T):
            t0 = clock()
            if t:
                # The actor acts on (and may hold until `finish`) the buffer's row, which no
                # later step of this chunk writes.
                obs_row = obs_rows[t]
                obs_row[...] = self._cur_obs
            else:  # a copy: the buffers may not exist yet (they are sized by this step's outputs)
                obs_row = self._cur_obs.copy()
            # The actor counts the timesteps itself: the policy's global timestep plus
            # `steps_since_sync` (which grows by `n` per step, as the actor's count does).
            if recurrent:
                actions, extra = self._act_recurrent(actor, obs_row)
            else:
                actions, _, extra = actor.act(obs_row)
            t1 = clock()
            if not b:
                self._alloc(extra, actor.deferred)
                b = self._buffers
            if t == 0:  # the buffers' rows, read once per chunk
                obs_buf, next_obs_buf, act_buf = b[SB.OBS], b[SB.NEXT_OBS], b[SB.ACTIONS]
                rew_buf, term_buf, done_buf = b[SB.REWARDS], b[SB.TERMINATEDS], b[SB.DONES]
                eps_buf, t_buf = b[SB.EPS_ID], b[SB.T]
                info_buf = b.get(SB.INFOS)
                extra_bufs = [(key, b[key]) for key in extra]
                obs_rows = self._obs_rows
                obs_buf[0] = obs_row
            act_buf[t] = actions
            for key, buf in extra_bufs:
                buf[t] = extra[key]
            eps_buf[t] = self._eps_id
            t_buf[t] = self._ep_len
            try:
                # Discrete actions go to the envs as Python ints, as a plain Gymnasium loop
                # passes them (`Discrete.contains` takes 3x longer for a NumPy integer).
                step = venv.step(actions.tolist() if int_actions else env_actions(actions, action_space, normalize, clip))
            except EnvError as e:
                raise self._located(e) from e.__cause__
            except Exception as e:  # e.g. a remote sub-env's error, arriving through Ray
                raise self._located(env_call_error("step()", e)) from e
            t2 = clock()
            rewards = step.rewards
            if step.starts is not None:  # before the checks: they name the new episode, at step 0
                self._reset_rows(t, step)
            if self._detailed_checks:
                self._check_each(step.obs, range(n), self._ep_len + 1)
            obs = self._transform(step.obs, None)
            if self._step_checks and not self._step_ok(obs, rewards):
                self._explain_step(step.obs, rewards, obs)
            rew_buf[t] = clipper(rewards) if clipper is not None else rewards
            if self._recurrent:
                self._prev_actions[:] = actions
                self._prev_rewards[:] = rew_buf[t]
            term_buf[t] = step.terminateds
            done_buf[t] = step.ends
            if info_buf is not None:
                for i, info in enumerate(step.infos):
                    info_buf[t, i] = info
            next_obs = obs_filter.apply_batch(obs)
            next_obs_buf[t] = next_obs
            self._ep_len += 1
            self._ep_ret += rewards
            self.steps_since_sync += n
            self._kept_rows += n
            if step_hook:
                self._episode_step(step, actions, next_obs)
            if step.reset_obs or step.starts is not None or step.ends.any():
                self._turn_over(t, step, next_obs)
            if render:
                venv.render(0)
            self._cur_obs = next_obs
            rows = t + 1
            t3 = clock()
            inference += t1 - t0
            env_wait += t2 - t1
            processing += t3 - t2
            if stop():
                break
        perf["inference"] += inference
        perf["env_wait"] += env_wait
        perf["processing"] += processing
        perf["steps"] += rows
        if rows:
            t0 = clock()
            self._finish_chunk(actor, rows)
            perf["inference"] += clock() - t0
        if self._bounds_per_chunk and self._step_checks and rows:
            b = self._buffers
            if not (self._obs_check.ok(b[SB.OBS][:rows]) and self._obs_check.ok(b[SB.NEXT_OBS][:rows])):
                self._explain_chunk(rows)
        return rows

    def _finish_chunk(self, actor, rows: int) -> None:
        """The actor's deferred columns (log-likelihoods, values, ...) of the chunk's first
        `rows` rows, written into the buffers."""
        b, n = self._buffers, self.num_envs
        for key, column in actor.finish().items():
            b[key][:rows] = column.reshape(rows, n, *column.shape[1:])

    def _act_recurrent(self, actor, obs: np.ndarray):
        """One batched step of a recurrent policy; the state and previous action / reward
        going in (and the state coming out) are added to the recorded columns."""
        actions, state_out, extra = actor.act(obs, self._state, self._prev_actions, self._prev_rewards)
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

    # --- chunk -> batch ------------------------------------------------------------
    def _chunk_to_batch(self, rows: int) -> SampleBatch:
        return chunk_to_batch(self._buffers, rows, self._valid)

    def _split_complete(self, chunk: SampleBatch) -> SampleBatch:
        return split_complete(chunk, self._pending)

    def _postprocess(self, batch: SampleBatch) -> SampleBatch:
        if batch.count == 0:
            return batch
        batch = drop_state_outs(postprocess_for_learning(self.policy, batch))
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
