"""ExternalMultiAgentEnv: an ExternalEnv whose observations, actions and rewards are
`{agent_id: value}` dicts (see env/external_env.py for the calls and their checks).

`get_action(episode_id, {agent: obs})` returns `{agent: action}` for the agents given; the
policy of each agent comes from `multiagent.policy_mapping_fn`, fixed per episode. An
agent's step closes when its next observation (or the episode's end) arrives and collects
every reward logged for it meanwhile.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym

from rlfleet.env.external_env import ExternalEnv


class ExternalMultiAgentEnv(ExternalEnv):
    """A multi-agent ExternalEnv.

    Args:
        action_space, observation_space: the spaces every agent shares (None: each
            policy's own, from `multiagent.policies`; then the calls are not checked
            against a space here, the sampler checks each observation for its policy).
        max_concurrent: how many episodes may run at once.
    """

    multi_agent = True

    def __init__(self, action_space: Optional[gym.Space] = None, observation_space: Optional[gym.Space] = None,
                 max_concurrent: int = 100):
        super().__init__(action_space, observation_space, max_concurrent)

    def _per_agent(self, value: Any, what: str) -> Dict[Any, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"{type(self).__name__}: the {what} must be a dict {{agent_id: {what}}}, "
                             f"got a {type(value).__name__}")
        return dict(value)

    def _from_agents(self, actions: Dict[Any, Any]) -> Dict[Any, Any]:
        return actions

    def _agent_label(self, aid: Any) -> str:
        return f", agent {aid!r}"


__all__ = ["ExternalMultiAgentEnv"]
