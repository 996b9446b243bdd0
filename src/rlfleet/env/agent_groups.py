"""Agent groups: several agents of a `MultiAgentEnv` presented as one agent (the reference's
`with_agent_groups`), the building block of value decomposition for teams (QMIX, VDN).

`env.with_agent_groups({"team": ["a", "b"]})` returns a `GroupedAgentsEnv` in which agent
``"team"`` observes a tuple of its members' observations (in the order listed), acts with a
tuple of their actions, receives the sum of their rewards, and is done when all its members
are; agents in no group pass through unchanged. The members' own rewards, and their infos,
stay available in the group's info under ``"_group_rewards"`` and ``"_group_info"``.

A group acts as one agent: all its members act on the same steps, so each step must carry
either every member's observation or none (members that finish early keep their last
observation and get reward 0 until the group ends). Anything else is an error naming the
group and the agent.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import gymnasium as gym

from rlfleet.env.multi_agent_env import ALL, AgentID, MultiAgentDict, MultiAgentEnv

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
        singles = self._single_spaces(env)
        if singles is not None:
            self.observation_space, self.action_space = singles
        self._last_obs: Dict[AgentID, Any] = {}
        self._finished: set = set()

    # --- spaces ----------------------------------------------------------------------
    def _single_spaces(self, env: MultiAgentEnv) -> Optional[Tuple[gym.Space, gym.Space]]:
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
            infos = dict(infos)
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


__all__ = ["GROUP_INFO", "GROUP_REWARDS", "GroupedAgentsEnv"]
