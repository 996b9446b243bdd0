"""PettingZoo adapters: ParallelEnv and AECEnv seen as rlfleet MultiAgentEnvs.

PettingZoo is optional (`pip install rlfleet[pettingzoo]`); this module imports nothing of
it at import time, and `import rlfleet` does not import this module.

    from pettingzoo.classic import rps_v2
    register_env("rps", lambda ctx: ParallelPettingZooEnv(rps_v2.parallel_env()))

An env creator may also return the PettingZoo env itself: the RolloutWorker wraps it.
"""
from __future__ import annotations

from typing import Any, Dict, Set

from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv


class _PettingZooBase(MultiAgentEnv):
    def __init__(self, env: Any):
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
        # A shared space when all agents have the same one (spaces compare by value).
        obs = list(self.observation_spaces.values())
        act = list(self.action_spaces.values())
        self.observation_space = obs[0] if obs and all(s == obs[0] for s in obs) else None
        self.action_space = act[0] if act and all(s == act[0] for s in act) else None
        self._truncated: Set[Any] = set()

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()

    @property
    def unwrapped(self):
        return self.env.unwrapped


class ParallelPettingZooEnv(_PettingZooBase):
    """A PettingZoo `ParallelEnv`: all live agents act at every step.

    Args:
        env: the ParallelEnv. The episode ends when ``env.agents`` is empty.
    """

    def reset(self, *, seed=None, options=None):
        self._truncated = set()
        obs, infos = self.env.reset(seed=seed, options=options)
        return dict(obs), {a: infos.get(a, {}) for a in obs}

    def step(self, action_dict):
        obs, rew, term, trunc, infos = self.env.step(action_dict)
        obs, rew, term, trunc = dict(obs), dict(rew), dict(term), dict(trunc)
        self._truncated |= {a for a, t in trunc.items() if t and not term.get(a)}
        done = not self.env.agents
        term[ALL] = done and not self._truncated
        trunc[ALL] = done and bool(self._truncated)
        return obs, rew, term, trunc, dict(infos)


class PettingZooEnv(_PettingZooBase):
    """A PettingZoo `AECEnv` (turn-based): one agent acts per step.

    Each step returns an observation only for the agent whose turn is next, rewards for
    every agent that received one (credited to its last action), and a final observation
    plus done flag for each agent that leaves. Agents that are done are stepped out with
    ``None`` actions here, as PettingZoo requires.

    Args:
        env: the AECEnv.
    """

    def reset(self, *, seed=None, options=None):
        self._truncated = set()
        self.env.reset(seed=seed, options=options)
        obs, rew, term, trunc, infos = {}, {}, {}, {}, {}
        self._drain_dead(obs, rew, term, trunc, infos)
        return obs, infos

    def step(self, action_dict):
        env = self.env
        agent = env.agent_selection
        if agent not in action_dict:
            raise ValueError(f"PettingZooEnv.step: it is agent {agent!r}'s turn, but the actions are for "
                             f"{sorted(map(str, action_dict))}")
        env.step(action_dict[agent])
        obs, rew, term, trunc, infos = {}, {}, {}, {}, {}
        self._add_rewards(rew)
        self._drain_dead(obs, rew, term, trunc, infos)
        done = not env.agents
        term[ALL] = done and not self._truncated
        trunc[ALL] = done and bool(self._truncated)
        return obs, rew, term, trunc, infos

    def _add_rewards(self, rew: Dict[Any, float]) -> None:
        for a, r in self.env.rewards.items():
            rew[a] = rew.get(a, 0.0) + float(r)

    def _drain_dead(self, obs, rew, term, trunc, infos) -> None:
        # Step out done agents (PettingZoo selects them first), then observe the next one.
        env = self.env
        while env.agents:
            agent = env.agent_selection
            is_term, is_trunc = bool(env.terminations[agent]), bool(env.truncations[agent])
            if not (is_term or is_trunc):
                obs[agent] = env.observe(agent)
                infos[agent] = env.infos.get(agent, {})
                return
            obs[agent] = env.observe(agent)
            infos[agent] = env.infos.get(agent, {})
            term[agent], trunc[agent] = is_term, is_trunc and not is_term
            if trunc[agent]:
                self._truncated.add(agent)
            env.step(None)
            self._add_rewards(rew)


def wrap_pettingzoo(env: Any) -> MultiAgentEnv:
    """The right adapter for a PettingZoo env instance (ParallelEnv or AECEnv)."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(env, ParallelEnv):
        return ParallelPettingZooEnv(env)
    if isinstance(env, AECEnv):
        return PettingZooEnv(env)
    raise TypeError(f"Not a PettingZoo ParallelEnv or AECEnv: {env!r}")
