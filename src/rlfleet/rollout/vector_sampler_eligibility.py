"""Whether a worker can sample with the vectorised multi-agent sampler
(rollout/vector_multi_agent_sampler.py), and what its policies' postprocessing gets in place
of `other_agent_batches`, which that sampler does not build.

`vector_sampler_unavailable` is the one place that lists what the vectorised sampler does not offer;
`make_sampler` (rollout/sampler_choice.py) sends such a worker to the general path, naming
the reason.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from rlfleet.env.multi_agent_env import MultiAgentVectorEnv
from rlfleet.env.vector_multi_agent_env import SlotMultiAgentEnv
from rlfleet.models.preprocessors import NoPreprocessor
from rlfleet.rollout.sampler_api import SamplerSettings
from rlfleet.utils.filters import NoFilter

NOT_SLOT_ENVS = "the env does not offer the slot API"
_HOOKS = ("on_episode_start", "on_episode_step", "on_episode_end", "on_postprocess_trajectory")


def vector_sampler_unavailable(worker: Any, settings: SamplerSettings) -> Optional[str]:
    """Why `worker` cannot sample with `VectorMultiAgentSampler` (None: it can). Its env must
    be a MultiAgentVectorEnv of slot envs; what the vectorised sampler does not offer yet sends the
    worker to the general path, which runs the same envs through their dict API."""
    env = worker.env
    if not isinstance(env, MultiAgentVectorEnv) or not all(isinstance(e, SlotMultiAgentEnv) for e in env.envs):
        return NOT_SLOT_ENVS
    if settings.complete_episodes:
        return "'batch_mode': 'complete_episodes'"
    if settings.observation_fn is not None:
        return "'multiagent.observation_fn' is set"
    if settings.rules.soft_horizon:
        return "'soft_horizon': True"
    if settings.record_infos:
        return "info dicts are recorded ('output' or a policy that reads infos)"
    if settings.render:
        return "'render_env': True"
    hooks = [name for name in _HOOKS if worker.callbacks.overrides(name)]
    if hooks:
        return f"the callbacks override {hooks[0]}"
    for pid, policy in worker.policy_map.items():
        if policy.is_recurrent():
            return f"policy {pid!r} is recurrent"
        if policy.needs_other_agent_batches:
            return f"policy {pid!r} reads other_agent_batches (needs_other_agent_batches)"
        # The policies act on the env's observations as they are (one buffer per group).
        if type(worker.preprocessors[pid]) is not NoPreprocessor:
            return f"policy {pid!r} has the preprocessor {type(worker.preprocessors[pid]).__name__} (not a flat Box)"
        if type(worker.filters[pid]) is not NoFilter:
            return f"policy {pid!r} has the observation filter {type(worker.filters[pid]).__name__}"
    return None


class OtherAgentBatchesUnavailable(Mapping):
    """What `postprocess_trajectory` gets as `other_agent_batches` here: reading it raises,
    naming the fix (an empty dict would let a centralised critic learn from nothing)."""

    def __init__(self, policy: Any):
        self.policy_type = type(policy).__name__
        self.declared = bool(policy.needs_other_agent_batches)  # then it joined by add_policy

    def _unavailable(self, *_):
        fix = ("the policy joined (add_policy) after the worker chose this sampler; list it in 'multiagent.policies' "
               "from the start" if self.declared else "set the class attribute `needs_other_agent_batches = True` "
               "on the policy")
        raise ValueError(f"{self.policy_type}.postprocess_trajectory reads other_agent_batches, which the vectorised "
                         f"multi-agent sampler does not build: {fix}, and the worker samples it on the general "
                         "multi-agent path, which passes them")

    __getitem__ = __iter__ = __len__ = _unavailable


__all__ = ["NOT_SLOT_ENVS", "OtherAgentBatchesUnavailable", "vector_sampler_unavailable"]
