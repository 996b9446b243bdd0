"""MultiAgentEnv: several agents in one env, each with its own observations and rewards.

The API is the reference's, on Gymnasium's terminated/truncated split:

- ``reset(seed=None, options=None) -> (obs_dict, info_dict)``: one entry per agent that
  acts first.
- ``step(action_dict) -> (obs, rewards, terminateds, truncateds, infos)``: per-agent dicts.
  ``terminateds`` and ``truncateds`` carry an ``"__all__"`` key: True ends the episode.

An agent acts on the step after it receives an observation. Agents may join (first appear in
``obs``) and leave (``terminateds[aid]`` or ``truncateds[aid]`` True, with a final observation)
at any step; turn-based envs return observations only for the agents whose turn it is, and a
reward that arrives for an agent without an observation is credited to its last action.

Spaces: ``observation_space`` / ``action_space`` when all agents share one, and/or
``observation_spaces`` / ``action_spaces`` dicts keyed by agent id.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

import gymnasium as gym

AgentID = Any
MultiAgentDict = Dict[AgentID, Any]
ALL = "__all__"


class MultiAgentEnv:
    """Base class of multi-agent envs (subclass it and implement `reset` and `step`).

    Attributes:
        observation_space: the space every agent shares (None when they differ).
        action_space: likewise for actions.
        observation_spaces: per-agent spaces ``{agent_id: space}`` (optional).
        action_spaces: per-agent spaces (optional).
        possible_agents: every agent id the env may produce (optional, used to infer spaces).
    """

    observation_space: Optional[gym.Space] = None
    action_space: Optional[gym.Space] = None
    observation_spaces: Optional[Dict[AgentID, gym.Space]] = None
    action_spaces: Optional[Dict[AgentID, gym.Space]] = None
    possible_agents: Optional[List[AgentID]] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None
              ) -> Tuple[MultiAgentDict, MultiAgentDict]:
        """Starts an episode; returns `(obs, infos)` for the agents that act first."""
        raise NotImplementedError  # abstract

    def step(self, action_dict: MultiAgentDict) -> Tuple[
            MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Applies the agents' actions; returns `(obs, rewards, terminateds, truncateds, infos)`."""
        raise NotImplementedError  # abstract

    # --- spaces ----------------------------------------------------------------------
    def get_agent_ids(self) -> Set[AgentID]:
        """Every agent id known up front (empty when the env cannot tell)."""
        if self.possible_agents:
            return set(self.possible_agents)
        return set(self.observation_spaces or {}) | set(self.action_spaces or {})

    def observation_space_for(self, agent_id: AgentID) -> Optional[gym.Space]:
        """The observation space of `agent_id` (its own, else the shared one, else None)."""
        spaces = self.observation_spaces or {}
        return spaces.get(agent_id, self.observation_space)

    def action_space_for(self, agent_id: AgentID) -> Optional[gym.Space]:
        spaces = self.action_spaces or {}
        return spaces.get(agent_id, self.action_space)

    # --- lifecycle ---------------------------------------------------------------------
    def with_agent_groups(self, groups: Dict[Any, List[AgentID]], obs_space: Optional[gym.Space] = None,
                          act_space: Optional[gym.Space] = None) -> "MultiAgentEnv":
        """This env with each group of agents acting as one agent: Tuple observations and
        actions, the members' rewards summed (`rlfleet.env.agent_groups.GroupedAgentsEnv`).

        Args:
            groups: group id -> member agent ids (the tuples' order).
            obs_space, act_space: the groups' Tuple spaces (default: the members' spaces).
        """
        from rlfleet.env.agent_groups import GroupedAgentsEnv

        return GroupedAgentsEnv(self, groups, obs_space, act_space)

    def render(self) -> Any:
        return None

    def close(self) -> None:
        pass

    @property
    def unwrapped(self) -> "MultiAgentEnv":
        return self


def make_multi_agent(env_name_or_creator: Union[str, Callable[[Any], gym.Env]]) -> type:
    """A MultiAgentEnv class whose agents ``0..num_agents-1`` each run their own copy of
    a single-agent env.

    Args:
        env_name_or_creator: a Gymnasium id, or `config -> gym.Env`.

    Returns:
        A class taking one `config` dict (``num_agents``, default 2; the rest goes to the
        creator). An agent leaves when its own copy ends; the episode ends when all have.
        ``terminateds["__all__"]`` is True when every agent terminated, ``truncateds["__all__"]``
        when all are done and at least one was truncated.
    """

    class MultiEnv(MultiAgentEnv):
        def __init__(self, config: Optional[dict] = None):
            config = dict(config or {})
            num = int(config.pop("num_agents", 2))
            if isinstance(env_name_or_creator, str):
                self.envs = [gym.make(env_name_or_creator) for _ in range(num)]
            else:
                self.envs = [env_name_or_creator(config) for _ in range(num)]
            self.possible_agents = list(range(num))
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
            self._terminated: Set[int] = set()
            self._truncated: Set[int] = set()

        def reset(self, *, seed=None, options=None):
            self._terminated, self._truncated = set(), set()
            obs, infos = {}, {}
            for i, env in enumerate(self.envs):
                # Distinct, reproducible seeds per copy from one episode seed.
                obs[i], infos[i] = env.reset(seed=None if seed is None else seed + 7919 * i, options=options)
            return obs, infos

        def step(self, action_dict):
            obs, rew, term, trunc, info = {}, {}, {}, {}, {}
            envs, terminated, truncated = self.envs, self._terminated, self._truncated
            for i, action in action_dict.items():
                o, r, te, tr, inf = envs[i].step(action)
                obs[i], rew[i], term[i], trunc[i], info[i] = o, r, te, tr, inf
                if te:
                    terminated.add(i)
                elif tr:
                    truncated.add(i)
            done = len(terminated) + len(truncated) == len(envs)
            term[ALL] = done and not truncated
            trunc[ALL] = done and bool(truncated)
            return obs, rew, term, trunc, info

        def render(self):
            return self.envs[0].render()

        def close(self):
            for env in self.envs:
                env.close()

    name = env_name_or_creator if isinstance(env_name_or_creator, str) else getattr(
        env_name_or_creator, "__name__", "env")
    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent_{name}".replace("-", "_").replace("/", "_")
    return MultiEnv


class SingleAgentAsMultiAgent(MultiAgentEnv):
    """A Gymnasium env seen as a MultiAgentEnv with one agent, ``"agent0"`` (the
    reference's dummy id): used when multi-agent policies run on a single-agent env."""

    AGENT_ID = "agent0"

    def __init__(self, env: gym.Env):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.possible_agents = [self.AGENT_ID]

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return {self.AGENT_ID: obs}, {self.AGENT_ID: info}

    def step(self, action_dict):
        aid = self.AGENT_ID
        obs, rew, term, trunc, info = self.env.step(action_dict[aid])
        return ({aid: obs}, {aid: rew}, {aid: term, ALL: term}, {aid: trunc, ALL: trunc and not term},
                {aid: info})

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()

    @property
    def unwrapped(self):
        return self.env.unwrapped


def is_pettingzoo_env(env: Any) -> bool:
    """True for PettingZoo ParallelEnv / AECEnv instances, checked without importing it."""
    return any(c.__module__.split(".")[0] == "pettingzoo" for c in type(env).__mro__)


class MultiAgentVectorEnv:
    """The `num_envs_per_worker` MultiAgentEnvs of one worker (the multi-agent sampler's
    `base_env`, handed to callbacks and `observation_fn`).

    Args:
        envs: the sub-envs.
        seeds: one seed per sub-env for its first reset (None: unseeded).
    """

    def __init__(self, envs: List[MultiAgentEnv], seeds: Optional[List[Optional[int]]] = None):
        if not envs:
            raise ValueError("MultiAgentVectorEnv needs at least one env")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self._seeds = list(seeds) if seeds is not None else [None] * self.num_envs

    def reset_at(self, index: int) -> Tuple[MultiAgentDict, MultiAgentDict]:
        """Resets sub-env `index` (seeded on its first reset)."""
        seed, self._seeds[index] = self._seeds[index], None
        return self.envs[index].reset(seed=seed)

    def seed_next_reset(self, seeds: List[Optional[int]]) -> None:
        """Seeds for each sub-env's next reset (a checkpoint restore restarts episodes)."""
        self._seeds = list(seeds)

    def get_sub_environments(self) -> List[MultiAgentEnv]:
        return list(self.envs)

    def render(self, index: int = 0):
        return self.envs[index].render()

    def close(self) -> None:
        for env in self.envs:
            env.close()
