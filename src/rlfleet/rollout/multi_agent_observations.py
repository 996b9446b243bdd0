"""The general multi-agent sampler's observations: the policy lookups, the pipeline from
the env's dicts to each agent's policy input, and the env checks (`MultiAgentObservations`).

Per agent: `multiagent.observation_fn` (when set), then the preprocessor and the filter of
the policy the agent maps to. Env checks (`rlfleet.env.checks`): each observation in detail
until the first episode ends (and the first observation of each policy), then a bounds /
NaN check of each preprocessed observation (`ObsRowCheck`); none after the first episode
with `disable_env_checking`. An env that raises or breaks its contract is an `EnvError`
naming the env, worker, sub-env, episode, step and agent.

Cost: the policy lookups are read once per policy per step (again after any user code:
`_user_code_ran`), and an observation that NoPreprocessor and NoFilter would return
unchanged skips them.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Tuple

import numpy as np

from rlfleet.env.checks import EnvCheckError, EnvError, ObsRowCheck, env_call_error, observation_problem
from rlfleet.models.preprocessors import NoPreprocessor
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.rollout.sampler_bookkeeping import SamplerBookkeeping
from rlfleet.utils.filters import NoFilter

_FLOAT32 = np.dtype(np.float32)
logger = logging.getLogger(__name__)


class MultiAgentObservations(SamplerBookkeeping):
    """What `MultiAgentSampler` does with the observations its envs return (see the module
    docstring); the sampler subclasses it and writes the step loop.

    Args:
        settings: the per-run settings.
        worker: the owning RolloutWorker (`policy_map`, `preprocessors`, `filters`, read at
            every use, so that policies added at run time take effect at once).
        env: the MultiAgentVectorEnv.
    """

    def __init__(self, settings: SamplerSettings, worker: Any, env: Any):
        super().__init__(settings)
        self.worker = worker
        self.env = env
        self._detailed_checks = True  # until the first episode ends
        self._step_checks = True  # then: not `disable_env_checking`
        self._checked: set = set()  # policies whose first observation passed the detailed check
        self._obs_checks: Dict[str, Tuple[Any, ObsRowCheck]] = {}  # pid -> (preprocessor, check)
        self._use_cache: Dict[str, tuple] = {}  # pid -> (preprocessor, filter, check, direct): `_uses`

    def _env_label(self) -> str:
        return type(self.env.envs[0]).__name__

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

    def _user_code_ran(self) -> None:
        """A callback or `observation_fn` ran: it may have changed the worker's policies."""
        self._use_cache = {}

    # --- env checks (rlfleet.env.checks) ------------------------------------------------
    def _located(self, error: EnvError, ep: Optional[MultiAgentEpisode], step: int, agent_id: Any = None,
                 index: Optional[int] = None) -> EnvError:
        """`error` with its location; remembered: later collections raise it again (the
        envs are mid-step, in an unknown state) until `restart()`."""
        return self._locate(error, sub_env_index=ep.env_index if ep is not None else index,
                            episode_id=ep.episode_id if ep is not None else self._next_episode_id(),
                            step=step, agent_id=agent_id)

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

    # --- observations ---------------------------------------------------------------------
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


def _what(result: Any) -> str:
    return f"a tuple of {len(result)}" if isinstance(result, tuple) else f"a {type(result).__name__}"
