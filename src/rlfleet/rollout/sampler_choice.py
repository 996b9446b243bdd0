"""Which sampler a RolloutWorker samples with (`make_sampler`): a custom `sample_collector`,
the offline reader for `input`, else the env sampler: `ExternalEnvSampler` for an ExternalEnv,
the vectorised single-agent sampler
(`SingleAgentSampler`) for one policy on a single-agent env, the vectorised multi-agent sampler
(`VectorMultiAgentSampler`) for slot envs (env/vector_multi_agent_env.py) where the config
allows, the general multi-agent path (`MultiAgentSampler`) otherwise; `fake_sampler` re-serves the first batch.

`worker` is the RolloutWorker asking (typed `Any`: the worker imports this module).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.multi_agent_env import MultiAgentVectorEnv
from rlfleet.rollout.external_sampler import ExternalEnvSampler
from rlfleet.rollout.fake_sampler import FakeSampler, custom_sampler
from rlfleet.rollout.multi_agent_sampler import MultiAgentSampler
from rlfleet.rollout.offline_sampler import OfflineSampler
from rlfleet.rollout.sampler import SingleAgentSampler
from rlfleet.rollout.sampler_api import Sampler, SamplerSettings
from rlfleet.rollout.vector_multi_agent_sampler import VectorMultiAgentSampler
from rlfleet.rollout.vector_sampler_eligibility import NOT_SLOT_ENVS, vector_sampler_unavailable

logger = logging.getLogger(__name__)


def make_sampler(worker: Any, settings: SamplerSettings, acting_policy=None) -> Optional[Sampler]:
    """The sampler for `worker`'s env and policies (None when it has no env).

    The vectorised single-agent sampler (`SingleAgentSampler`) when the env is a single-agent
    vector env and the worker has one policy; the general path (`MultiAgentSampler`) otherwise.

    Args:
        acting_policy: the vectorised single-agent sampler's acting policy when it is not the
            worker's own (`sample_async` acts with a copy).
    """
    if settings.sample_collector is not None:
        sampler = custom_sampler(settings.sample_collector, worker, settings)
    elif settings.offline_input:
        # Offline input: a reader is the sampler; the env sampler is made when needed.
        sampler = OfflineSampler(worker=worker, settings=settings, log_dir=worker.log_dir,
                                 make_env_sampler=lambda: _env_sampler(worker, settings))
    else:
        sampler = _env_sampler(worker, settings, acting_policy)
    if settings.fake_sampler and sampler is not None:
        # Learner benchmarks: the first batch, re-served forever (rollout/fake_sampler.py).
        sampler = FakeSampler(sampler)
    return sampler


def _env_sampler(worker: Any, settings: SamplerSettings, acting_policy=None) -> Optional[Sampler]:
    env = worker.env
    if env is None:
        return None
    if isinstance(env, ExternalEnv):
        if acting_policy is not None:
            raise ValueError("'sample_async': True is not available with an ExternalEnv (its own thread already "
                             "runs beside training); use False")
        recurrent = [pid for pid, p in worker.policy_map.items() if p.is_recurrent()]
        if recurrent:
            raise ValueError(f"Policy {recurrent[0]!r} is recurrent; the ExternalEnv sampler does not run recurrent "
                             "policies yet (use no use_lstm / use_attention with an ExternalEnv or a policy server)")
        return ExternalEnvSampler(worker=worker, env=env, callbacks=worker.callbacks, settings=settings)
    if isinstance(env, MultiAgentVectorEnv):
        why = vector_sampler_unavailable(worker, settings)
        if why is None:  # slot envs: the vectorised multi-agent sampler
            return VectorMultiAgentSampler(worker=worker, vector_env=env, callbacks=worker.callbacks,
                                           settings=settings)
        if why != NOT_SLOT_ENVS:
            logger.warning("Sampling the slot env %s through the general multi-agent path: %s",
                           type(env.envs[0]).__name__, why)
        return MultiAgentSampler(worker=worker, vector_env=env, callbacks=worker.callbacks, settings=settings)
    (pid,) = list(worker.policy_map)
    return SingleAgentSampler(
        worker=worker, vector_env=env, policy=acting_policy or worker.policy_map[pid],
        preprocessor=worker.preprocessors[pid], obs_filter=worker.filters[pid], callbacks=worker.callbacks,
        settings=settings,
    )


__all__ = ["make_sampler"]
