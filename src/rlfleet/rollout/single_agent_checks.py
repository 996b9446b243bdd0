"""The env checks of the vectorised single-agent sampler (`SingleAgentEnvChecks`).

What the envs return is checked as it arrives (`rlfleet.env.checks`): each observation in
detail until the first episode ends, then the stacked preprocessed observations and the
rewards with a few vectorised calls per step (none with `disable_env_checking`). A Box env
without an observation filter (the common case) has its buffers hold what the env returned
(as float32), so each step checks only that it is finite (one sum) and the bounds are
checked once per chunk, over the whole `new_obs` buffer (an error still names the exact
step); otherwise the bounds are checked at every step (a stateful filter must never see a
bad observation). An env that raises or breaks its contract is an `EnvError` naming the
env, worker, sub-env, episode and step.
"""
from __future__ import annotations

import logging
import math
from typing import Any, List, Optional

import numpy as np
from gymnasium.spaces import Box

from rlfleet.env.checks import EnvCheckError, EnvError, ObsBatchCheck, observation_problem, reward_problem
from rlfleet.models.preprocessors import NoPreprocessor
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.chunk_buffers import env_label
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.rollout.sampler_bookkeeping import SamplerBookkeeping
from rlfleet.utils.filters import NoFilter

SB = SampleBatch
logger = logging.getLogger(__name__)


class SingleAgentEnvChecks(SamplerBookkeeping):
    """The checks `SingleAgentSampler` runs on what its vector env returns (see the module
    docstring); the sampler subclasses it and calls them from its step loop.

    Args:
        settings: the per-run settings.
        vector_env: the sub-envs.
        preprocessor: the policy's preprocessor (its `original_space`, when set, is what the
            observations must match: the config's `observation_space`, else the env's).
        obs_filter: the policy's observation filter.
    """

    def __init__(self, settings: SamplerSettings, vector_env: Any, preprocessor: Any, obs_filter: Any):
        super().__init__(settings)
        space = getattr(preprocessor, "original_space", None)
        self._obs_space = vector_env.observation_space if space is None else space
        self._obs_check = ObsBatchCheck(preprocessor.observation_space)
        self._detailed_checks = True  # until the first episode ends
        self._step_checks = True  # then: not `disable_env_checking`
        self._bounds_per_chunk = isinstance(preprocessor, NoPreprocessor) and isinstance(obs_filter, NoFilter)
        self._float_obs = preprocessor.dtype != np.uint8
        # Batched envs hand over one array: checked whole before any per-observation check.
        self._raw_batch_check = ObsBatchCheck(self._obs_space) if isinstance(self._obs_space, Box) else None

    def _env_label(self) -> str:
        return env_label(self.env)

    def _located(self, error: EnvError, index: Optional[int] = None, step: Optional[int] = None,
                 episode: Optional[int] = None) -> EnvError:
        """`error` with this sampler's part of the location (a sub-env's step within its
        episode: 0 for its reset); remembered: later collections raise it again (the envs
        are mid-step, in an unknown state) until `restart()`."""
        index = error.sub_env_index if error.sub_env_index is not None else index
        if episode is None and index is not None:
            # Before the first reset went through, the episode is the one about to start.
            started = self._cur_obs is not None
            episode = int(self._eps_id[index]) if started else self._eps_base + self._eps_counter + index + 1
        return self._locate(error, sub_env_index=index, episode_id=episode, step=step)

    def _check_each(self, raw_obs, indices, steps, episode: Optional[int] = None) -> None:
        """The detailed check of each raw observation: sub-env `indices[k]` gave
        `raw_obs[k]` at its episode's step `steps[k]`."""
        space = self._obs_space
        if self._raw_batch_check is not None and self._raw_batch_ok(raw_obs):
            return  # a batched env's whole array at once; each observation only when it fails
        for i, obs, step in zip(indices, raw_obs, steps):
            problem = observation_problem(obs, space)
            if problem is not None:
                raise self._located(EnvCheckError(problem), i, int(step), episode)

    def _raw_batch_ok(self, raw_obs: Any) -> bool:
        """Whether a stacked array of raw observations `[B, *shape]` is all in the Box space
        (shape, a dtype that casts safely, finite and within bounds)."""
        space = self._obs_space
        return (isinstance(raw_obs, np.ndarray) and raw_obs.shape[1:] == space.shape
                and np.can_cast(raw_obs.dtype, space.dtype, casting="same_kind")
                and self._raw_batch_check.ok(raw_obs))

    def _transform(self, raw_obs: List, steps) -> np.ndarray:
        """The preprocessed observations of every sub-env (each at its episode's `steps[i]`;
        None: the step after the current one)."""
        try:
            return self.preprocessor.transform_batch(raw_obs)
        except Exception as e:
            # Say which observation the preprocessor could not read, and why.
            steps = self._ep_len + 1 if steps is None else steps
            self._check_each(raw_obs, range(len(raw_obs)), steps)
            raise self._located(EnvCheckError(
                f"the preprocessor {self.preprocessor} could not read the observations: {e}")) from e

    def _step_ok(self, obs: np.ndarray, rewards: np.ndarray) -> bool:
        """The vectorised per-step check (see `_bounds_per_chunk`). A sum is NaN / inf when
        any term is (finite terms overflow only past 1e38 for float32 observations, 1e308 for
        rewards: then `_explain_step` finds nothing and sampling goes on)."""
        if not math.isfinite(np.add.reduce(rewards)):
            return False
        if self._bounds_per_chunk:
            return self._finite(obs)
        return self._obs_check.ok(obs)

    def _finite(self, obs: np.ndarray) -> bool:
        return not self._float_obs or math.isfinite(np.add.reduce(obs, axis=None))

    def _explain_chunk(self, rows: int) -> None:
        """Raises the EnvCheckError for the chunk's first out-of-bounds observation (`obs`
        rows hold each episode's first one, `new_obs` rows the ones steps returned)."""
        b = self._buffers
        space = self.preprocessor.observation_space  # the env's Box, as float32
        valid = self._valid
        for t in range(rows):
            for i in range(self.num_envs):
                if valid is not None and not valid[t, i]:
                    continue  # a dropped reset row: its first observation is the next row's `obs`
                for key, step in ((SB.OBS, int(b[SB.T][t, i])), (SB.NEXT_OBS, int(b[SB.T][t, i]) + 1)):
                    if not self._obs_check.ok(b[key][t, i]):
                        problem = observation_problem(b[key][t, i], space) or f"observation outside {space}"
                        raise self._located(EnvCheckError(problem), i, step, int(b[SB.EPS_ID][t, i]))

    def _explain_step(self, raw_obs: List, rewards: np.ndarray, obs: np.ndarray) -> None:
        """Raises the EnvCheckError for a step whose vectorised check failed."""
        for i in range(self.num_envs):
            problems = [p for p in (observation_problem(raw_obs[i], self._obs_space), reward_problem(rewards[i]))
                        if p is not None]
            if problems:
                raise self._located(EnvCheckError("; ".join(problems)), i, int(self._ep_len[i]) + 1)
        if self._obs_check.ok(obs):
            return
        # The env is not at fault: the preprocessor's outputs leave the space it declares
        # (a custom preprocessor). Say so once and stop checking them.
        logger.warning("The outputs of preprocessor %s leave its observation_space %s, though the env's "
                       "observations are in their space; not checking them any more",
                       self.preprocessor, self.preprocessor.observation_space)
        self._obs_check.trivial = True
