"""One MADDPG policy per agent: MADDPG's critics need every agent's spaces when they are
built, so the trainer reads them from the env before its workers exist.

With `multiagent.policies` left at its default, every agent of a multi-agent env gets its
own policy, named after it (`str(agent_id)`) and mapped by `agent_policy_id`; given
policies whose spaces are None take those of the env agent of the same name.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from rlfleet.env.as_multi_agent import as_multi_agent
from rlfleet.env.env_context import EnvContext
from rlfleet.env.multi_agent_env import SingleAgentAsMultiAgent
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID


def agent_policy_id(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    """The policy mapping of one policy per agent: the agent's id as a string."""
    return str(agent_id)


def maddpg_policies(env: Any) -> Dict[str, PolicySpec]:
    """`{str(agent id): PolicySpec(None, its obs space, its action space, {})}` for every agent
    of a multi-agent env (a PettingZoo env or an rlfleet MultiAgentEnv); use it with
    `policy_mapping_fn: agent_policy_id`."""
    env = as_multi_agent(env)
    return {str(a): PolicySpec(None, env.observation_space_for(a), env.action_space_for(a), {})
            for a in env.possible_agents or sorted(env.get_agent_ids(), key=str)}


def fill_agent_policies(config: dict, env_creator: Callable[[EnvContext], Any]) -> None:
    """Sets, in place, one policy per agent (default policies) or the missing spaces of the
    given policies named after agents, from an env made once by `env_creator`. A
    single-agent env keeps its default policy."""
    ma = config["multiagent"]
    specs = ma.get("policies") or {}
    default = set(specs) <= {DEFAULT_POLICY_ID} and ma.get("policy_mapping_fn") is None
    if not default and all(s.observation_space is not None and s.action_space is not None for s in specs.values()):
        return
    if env_creator is None:
        return
    env = as_multi_agent(env_creator(EnvContext(config.get("env_config") or {}, worker_index=0)))
    try:
        if isinstance(env, SingleAgentAsMultiAgent):
            return
        agents = maddpg_policies(env)
    finally:
        env.close()
    if default:
        base = (specs.get(DEFAULT_POLICY_ID) or PolicySpec()).config or {}
        ma["policies"] = {pid: spec._replace(config=dict(base)) for pid, spec in agents.items()}
        ma["policy_mapping_fn"] = agent_policy_id
        return
    ma["policies"] = {pid: spec._replace(observation_space=spec.observation_space or agents[pid].observation_space,
                                         action_space=spec.action_space or agents[pid].action_space)
                      if pid in agents else spec for pid, spec in specs.items()}
