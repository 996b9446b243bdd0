"""MultiAgentEnv: several agents in one env, each with its own observations and rewards.

The API is RLlib 1.x's `MultiAgentEnv` (its envs port by splitting `dones`), on Gymnasium's split:

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

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

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
        actions, the members' rewards summed (`GroupedAgentsEnv`).

        Args:
            groups: group id -> member agent ids (the tuples' order).
            obs_space, act_space: the groups' Tuple spaces (default: the members' spaces).
        """
        return GroupedAgentsEnv(self, groups, obs_space, act_space)

    def render(self) -> Any:
        return None

    def close(self) -> None:
        pass

    @property
    def unwrapped(self) -> "MultiAgentEnv":
        return self


# --- agent groups ---------------------------------------------------------------------
# Several agents presented as one (RLlib 1.x's `MultiAgentEnv.with_agent_groups`), the building
# block of value decomposition for teams: the group observes a tuple of its members' observations (in
# the order listed), acts with a tuple of their actions, receives the sum of their rewards,
# and is done when all its members are; other agents pass through. The members' own rewards
# and infos stay in the group's info under "_group_rewards" and "_group_info". A group acts
# as one agent, so each step carries every running member's observation or none; members that
# finish early keep their last observation and get reward 0 until the group ends.
GROUP_REWARDS = "_group_rewards"
GROUP_INFO = "_group_info"


class GroupedAgentsEnv(MultiAgentEnv):
    """`env` with each group of `groups` acting as one agent (see the module doc).

    Args:
        env: the multi-agent env.
        groups: group id -> the member agent ids, in the order of the tuples.
        obs_space: the groups' observation space (default: the Tuple of the members' spaces,
            where `env` can tell them).
        act_space: likewise for actions.

    Raises:
        ValueError: an empty group, an agent in two groups, a group id that is also an
            agent's, or given spaces that are not Tuples of the group's size.
    """

    def __init__(self, env: MultiAgentEnv, groups: Mapping[Any, Sequence[AgentID]],
                 obs_space: Optional[gym.Space] = None, act_space: Optional[gym.Space] = None) -> None:
        self.env = env
        self.groups: Dict[Any, List[AgentID]] = {gid: list(members) for gid, members in dict(groups).items()}
        self.group_of: Dict[AgentID, Any] = {}
        for gid, members in self.groups.items():
            if not members:
                raise ValueError(f"with_agent_groups: group {gid!r} has no members")
            for aid in members:
                if aid in self.group_of:
                    raise ValueError(f"with_agent_groups: agent {aid!r} is in groups {self.group_of[aid]!r} and "
                                     f"{gid!r}; an agent belongs to one group at most")
                self.group_of[aid] = gid
        known = env.get_agent_ids()
        for gid in self.groups:
            if gid in known and gid not in self.group_of:
                raise ValueError(f"with_agent_groups: group id {gid!r} is also an agent of the env; name the group "
                                 "differently")
        for name, space in (("obs_space", obs_space), ("act_space", act_space)):
            if space is not None and not isinstance(space, gym.spaces.Tuple):
                raise ValueError(f"with_agent_groups({name}={space}): a group's space is a gym.spaces.Tuple with one "
                                 "entry per member")
        self._obs_space, self._act_space = obs_space, act_space
        self.possible_agents = ([a for a in (env.possible_agents or sorted(known, key=str)) if a not in self.group_of]
                                + list(self.groups))
        singles = self._single_spaces()
        if singles is not None:
            self.observation_space, self.action_space = singles
        self._last_obs: Dict[AgentID, Any] = {}
        self._finished: set = set()

    # --- spaces ----------------------------------------------------------------------
    def _single_spaces(self) -> Optional[Tuple[gym.Space, gym.Space]]:
        """The spaces every agent shares, when the env is a single group and they are known."""
        if len(self.possible_agents) != 1 or self.possible_agents[0] not in self.groups:
            return None
        gid = self.possible_agents[0]
        obs, act = self.observation_space_for(gid), self.action_space_for(gid)
        return None if obs is None or act is None else (obs, act)

    def observation_space_for(self, agent_id: AgentID) -> Optional[gym.Space]:
        return self._space_for(agent_id, self._obs_space, self.env.observation_space_for)

    def action_space_for(self, agent_id: AgentID) -> Optional[gym.Space]:
        return self._space_for(agent_id, self._act_space, self.env.action_space_for)

    def _space_for(self, agent_id, given, member_space) -> Optional[gym.Space]:
        if agent_id not in self.groups:
            return member_space(agent_id)
        size = len(self.groups[agent_id])
        if given is not None:
            if len(given.spaces) != size:
                raise ValueError(f"with_agent_groups: group {agent_id!r} has {size} members but its space {given} "
                                 f"has {len(given.spaces)} entries")
            return given
        spaces = [member_space(aid) for aid in self.groups[agent_id]]
        return None if any(s is None for s in spaces) else gym.spaces.Tuple(spaces)

    # --- episodes ---------------------------------------------------------------------
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self._last_obs, self._finished = {}, set()
        return self._group_obs(obs), self._group_infos(infos, obs)

    def step(self, action_dict: MultiAgentDict):
        actions: MultiAgentDict = {}
        for aid, action in action_dict.items():
            members = self.groups.get(aid)
            if members is None:
                actions[aid] = action
                continue
            if not isinstance(action, (tuple, list)) or len(action) != len(members):
                raise ValueError(f"group {aid!r}: its action must be a tuple of {len(members)} actions, one per member "
                                 f"{members}; got {action!r}")
            actions.update({m: a for m, a in zip(members, action) if m not in self._finished})
        obs, rewards, terminateds, truncateds, infos = self.env.step(actions)
        out_rewards = {aid: r for aid, r in rewards.items() if aid not in self.group_of}
        out_terms = {aid: v for aid, v in terminateds.items() if aid not in self.group_of}
        out_truncs = {aid: v for aid, v in truncateds.items() if aid not in self.group_of}
        episode_over = bool(terminateds.get(ALL)) or bool(truncateds.get(ALL))
        infos = dict(infos)  # the group entries are added to a copy
        for gid, members in self.groups.items():
            if not any(m in obs or m in rewards or m in terminateds or m in truncateds for m in members):
                continue
            member_rewards = [float(rewards.get(m, 0.0)) for m in members]
            out_rewards[gid] = sum(member_rewards)
            for m in members:
                if terminateds.get(m) or truncateds.get(m):
                    self._finished.add(m)
            done = all(m in self._finished for m in members) or episode_over
            out_terms[gid] = done and (any(terminateds.get(m) for m in members) or bool(terminateds.get(ALL)))
            out_truncs[gid] = done and not out_terms[gid]
            infos[gid] = {**({} if gid not in infos else dict(infos[gid])), GROUP_REWARDS: member_rewards}
        return self._group_obs(obs), out_rewards, out_terms, out_truncs, self._group_infos(infos, obs)

    def _group_obs(self, obs: MultiAgentDict) -> MultiAgentDict:
        out = {aid: o for aid, o in obs.items() if aid not in self.group_of}
        for gid, members in self.groups.items():
            present = [m for m in members if m in obs]
            if not present:
                continue
            absent = [m for m in members if m not in obs and (m not in self._finished or m not in self._last_obs)]
            if absent:
                raise ValueError(f"group {gid!r}: the env gave observations for {present} but not for {absent} "
                                 "on the same step; a group acts as one agent, so all its members (but those "
                                 "that finished) must observe together")
            for m in present:
                self._last_obs[m] = obs[m]
            out[gid] = tuple(self._last_obs[m] for m in members)
        return out

    def _group_infos(self, infos: MultiAgentDict, obs: MultiAgentDict) -> MultiAgentDict:
        out = {aid: i for aid, i in infos.items() if aid not in self.group_of}
        for gid, members in self.groups.items():
            if gid in obs or gid in infos or any(m in infos for m in members):
                group_info = dict(infos.get(gid) or {})
                group_info[GROUP_INFO] = [infos.get(m, {}) for m in members]
                out[gid] = group_info
        return out

    def get_agent_ids(self):
        return set(self.possible_agents)

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> MultiAgentEnv:
        return self.env.unwrapped



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
    """A Gymnasium env seen as a MultiAgentEnv with one agent, ``"agent0"`` (RLlib 1.x's
    `_DUMMY_AGENT_ID`): used when multi-agent policies run on a single-agent env."""

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
        return self.envs[index].reset(seed=self.next_seed(index))

    def next_seed(self, index: int) -> Optional[int]:
        """The seed of sub-env `index`'s next reset (its own on the first one, then None)."""
        seed, self._seeds[index] = self._seeds[index], None
        return seed

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
