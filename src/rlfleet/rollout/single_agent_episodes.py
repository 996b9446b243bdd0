"""The episode bookkeeping of the vectorised single-agent sampler (`SingleAgentEpisodes`).

After each vector step the sampler hands over the step (`VectorStep`) and `_turn_over` ends
the episodes that ended, checks and filters the next episodes' first observations and starts
them, for all sub-envs at once. Without episode callbacks or a per-episode exploration (the
common case) there is no `Episode` object: ids, lengths and returns live in arrays and the
metrics rows are made in one call per step, so the Python work per vector step does not grow
with the number of sub-envs beyond one small object per finished episode.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlfleet.env.checks import EnvCheckError
from rlfleet.rollout.episode import Episode, RolloutMetrics
from rlfleet.rollout.single_agent_checks import SingleAgentEnvChecks


class SingleAgentEpisodes(SingleAgentEnvChecks):
    """Starts and ends the sampler's episodes (see the module docstring). The sampler sets
    `_plain` (no per-episode Python objects needed), `_valid`, `_recurrent` and the arrays
    `_eps_id`, `_ep_len`, `_ep_ret` (one entry per sub-env)."""

    def _turn_over(self, t: int, step: Any, next_obs: np.ndarray) -> None:
        """The episodes `step` ended end; the sub-envs with a first observation start their next
        one (`next_obs` gets it, filtered). A vector env in Gymnasium's NEXT_STEP autoreset mode
        hands that over one step later (`step.starts`): that row is no transition and is dropped."""
        ended = np.flatnonzero(step.ends)
        if len(ended):
            self._end_episodes(ended)
        reset_obs = step.reset_obs
        if reset_obs:
            idx = np.fromiter(reset_obs, np.int64, len(reset_obs))
            raws = list(reset_obs.values())
            next_obs[idx] = self.filter.apply_batch(self._first_obs_batch(idx, raws))
            self._start_episodes(idx, raws)
        if step.starts is not None and self._recurrent:  # after this step's previous action / reward
            for i in np.flatnonzero(step.starts).tolist():
                self._reset_recurrent(i)

    def _reset_rows(self, t: int, step: Any) -> None:
        """A vector env in Gymnasium's NEXT_STEP autoreset mode reset the sub-envs `step.starts`
        in this step: their rows are no transitions (dropped) and their `obs` are their next
        episodes' first, which start here, before the step's checks (which then name the new
        episode, at step 0)."""
        if self._valid is None:
            self._valid = np.ones((self._chunk_len, self.num_envs), bool)
        self._valid[t] = ~step.starts
        self._kept_rows -= int(step.starts.sum())
        idx = np.flatnonzero(step.starts)
        self._start_episodes(idx, [step.obs[i] for i in idx.tolist()], reset_recurrent=False)
        self._ep_len[idx] = -1  # the step's own count brings it to 0: the first observation is step 0

    def _first_obs_batch(self, idx: np.ndarray, raws: Sequence[Any]) -> np.ndarray:
        """The first observations of sub-envs `idx`' next episodes, preprocessed and checked
        like a step's (the vectorised check; the details only when it fails)."""
        try:
            obs = self.preprocessor.transform_batch(raws)
        except Exception as e:
            self._explain_first(idx, raws)
            raise self._located(EnvCheckError(f"the preprocessor {self.preprocessor} could not read the first "
                                              f"observations: {e}"), int(idx[0]), 0, self._next_episode_id()) from e
        if self._step_checks and not (self._finite(obs) if self._bounds_per_chunk else self._obs_check.ok(obs)):
            self._explain_first(idx, raws)
        return obs

    def _explain_first(self, idx: np.ndarray, raws: Sequence[Any]) -> None:
        first_id = self._next_episode_id()
        for k, (i, raw) in enumerate(zip(idx.tolist(), raws)):
            self._check_each([raw], [i], [0], first_id + k)

    def _start_episodes(self, idx: np.ndarray, raws: Sequence[Any], reset_recurrent: bool = True) -> None:
        if self._recurrent and reset_recurrent:
            for i in idx.tolist():
                self._reset_recurrent(i)
        if not self._plain:
            for i, raw in zip(idx.tolist(), raws):
                self._new_episode(i, raw)
            return
        k = len(idx)
        self._eps_id[idx] = np.arange(self._eps_base + self._eps_counter + 1,
                                      self._eps_base + self._eps_counter + 1 + k)
        self._eps_counter += k
        self._ep_len[idx] = 0
        self._ep_ret[idx] = 0.0

    def _end_episodes(self, ended: np.ndarray) -> None:
        if not self._plain:
            for i in ended.tolist():
                self._end_episode(i)
            return
        lengths = self._ep_len[ended].tolist()
        self._finished_steps += sum(lengths)
        self.metrics.extend(map(RolloutMetrics, lengths, self._ep_ret[ended].tolist()))
        self._first_episode_checked()

    def _new_episode(self, i: int, raw_obs) -> None:
        self._eps_counter += 1
        self._eps_id[i] = self._eps_base + self._eps_counter
        self._ep_len[i] = 0
        self._ep_ret[i] = 0.0
        if self._plain:
            return
        episode = Episode(int(self._eps_id[i]), i)
        episode._last_raw_obs = raw_obs
        self._episodes[i] = episode
        if self._exploration_episode_start is not None:
            self._exploration_episode_start()
        if self._hooks["on_episode_start"]:
            self.callbacks.on_episode_start(
                worker=self.worker, base_env=self.env, policies=self.worker.policy_map, episode=episode, env_index=i
            )

    def _episode_step(self, step, actions, next_obs) -> None:
        for i, episode in enumerate(self._episodes):
            if step.starts is not None and step.starts[i]:
                continue  # a vector env's reset step: no transition of any episode
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
        self._first_episode_checked()

    def _first_episode_checked(self) -> None:
        if self._detailed_checks:  # the first episode is checked: from now on, vectorised checks
            self._detailed_checks = False
            self._step_checks = self.settings.check_env_steps
