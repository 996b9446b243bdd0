"""Grouped envs for QMIX's examples and tests: one team of agents acting as one
(`MultiAgentEnv.with_agent_groups`), named by path in tuned examples
(`env: rlfleet.env.examples.team_envs:two_step_team`)."""
from __future__ import annotations

from typing import Optional

from rlfleet.env.examples.two_step_game import TwoStepGame
from rlfleet.env.multi_agent_env import MultiAgentEnv


def two_step_team(env_config: Optional[dict] = None) -> MultiAgentEnv:
    """The two-step game's two agents as one group, `"team"` (no options)."""
    return TwoStepGame(env_config).with_agent_groups({"team": [0, 1]})


def simple_spread_team(env_config: Optional[dict] = None) -> MultiAgentEnv:
    """mpe2's simple_spread (discrete actions) through the PettingZoo Parallel adapter, its
    agents as one group, `"team"`. `env_config` goes to `simple_spread_v3.parallel_env`
    (e.g. `N`, `max_cycles`, `local_ratio`); `continuous_actions` must stay False."""
    from mpe2 import simple_spread_v3  # optional: the multiagent extra

    from rlfleet.env.pettingzoo import ParallelPettingZooEnv

    options = dict(env_config or {})
    if options.get("continuous_actions"):
        raise ValueError("simple_spread_team: QMIX needs discrete actions; leave 'continuous_actions' False")
    options["continuous_actions"] = False
    env = ParallelPettingZooEnv(simple_spread_v3.parallel_env(**options))
    return env.with_agent_groups({"team": list(env.possible_agents)})


__all__ = ["simple_spread_team", "two_step_team"]
