"""The `multiagent` config section, read once into a typed object (`MultiAgentSettings`).

This is the one place that reads `config["multiagent"]`: the RolloutWorker builds its
settings here when it is made, and the trainer-side code (step counting, replay modes,
policy specs) asks the same object instead of re-parsing the dict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID


@dataclass(frozen=True)
class MultiAgentSettings:
    """What the `multiagent` section of a config asks for.

    Attributes:
        policies: `policies`, as given (`{policy_id: PolicySpec}` once validated; empty: none given).
        policy_mapping_fn: `policy_mapping_fn` (None: the default mapping).
        policies_to_train: `policies_to_train` (None: every policy trains).
        count_steps_by: "env_steps" or "agent_steps": what batch sizes and timesteps count.
        observation_fn: `observation_fn` (None: the env's observations as they are).
        replay_mode: "independent" or "lockstep" (off-policy replay of multi-agent batches).
        policy_map_capacity: policies kept in memory at once (the rest are swapped to disk).
        policy_map_cache: the folder the swapped-out policies go to (None: the trainer's).
    """

    policies: Dict[str, Any] = field(default_factory=dict)
    policy_mapping_fn: Optional[Callable] = None
    policies_to_train: Optional[List[str]] = None
    count_steps_by: str = "env_steps"
    observation_fn: Optional[Callable] = None
    replay_mode: Optional[str] = None
    policy_map_capacity: int = 100
    policy_map_cache: Optional[str] = None

    @classmethod
    def from_config(cls, config: dict) -> "MultiAgentSettings":
        """The settings of `config` (a trainer or worker config; no `multiagent`: the defaults)."""
        ma = config.get("multiagent") or {}
        return cls(
            policies=ma.get("policies") or {},
            policy_mapping_fn=ma.get("policy_mapping_fn"),
            policies_to_train=ma.get("policies_to_train"),
            count_steps_by=ma.get("count_steps_by") or "env_steps",
            observation_fn=ma.get("observation_fn"),
            replay_mode=ma.get("replay_mode"),
            policy_map_capacity=int(ma.get("policy_map_capacity") or 100),
            policy_map_cache=ma.get("policy_map_cache"),
        )

    @property
    def count_agent_steps(self) -> bool:
        """Whether batch sizes and timesteps count agent steps (`count_steps_by: agent_steps`)."""
        return self.count_steps_by == "agent_steps"

    @property
    def lockstep(self) -> bool:
        """Whether off-policy replay keeps the agents of a step together (`replay_mode: lockstep`)."""
        return self.replay_mode == "lockstep"

    @property
    def configured(self) -> bool:
        """True when the config asks for more than the single default policy (so even a
        single-agent env takes the multi-agent path)."""
        policies = self.policies
        if set(policies) - {DEFAULT_POLICY_ID}:
            return True
        spec = policies.get(DEFAULT_POLICY_ID) if isinstance(policies, dict) else None
        if isinstance(spec, PolicySpec) and (spec.policy_class is not None or spec.observation_space is not None
                                             or spec.action_space is not None or bool(spec.config)):
            return True
        return self.policy_mapping_fn is not None or self.observation_fn is not None
