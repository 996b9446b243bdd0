"""Any env a worker may be given, seen as a MultiAgentEnv (the multi-agent sampler's view).

Apart from `multi_agent_env.py` because the PettingZoo adapters build on `MultiAgentEnv`:
the module defining it cannot also import them.
"""
from __future__ import annotations

from typing import Any

from rlfleet.env.multi_agent_env import MultiAgentEnv, SingleAgentAsMultiAgent, is_pettingzoo_env


def as_multi_agent(env: Any) -> MultiAgentEnv:
    """`env` as a MultiAgentEnv: unchanged, PettingZoo envs wrapped, Gymnasium envs as one agent."""
    if isinstance(env, MultiAgentEnv):
        return env
    if is_pettingzoo_env(env):
        from rlfleet.env.pettingzoo import wrap_pettingzoo

        return wrap_pettingzoo(env)
    return SingleAgentAsMultiAgent(env)


__all__ = ["as_multi_agent"]
