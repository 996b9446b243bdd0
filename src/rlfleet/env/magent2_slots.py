"""MAgent2 battles as slot envs: the grid world's arrays read directly, no dict per agent.

MAgent2 (`pip install magent2`) keeps each team's agents in arrays (`get_observation`,
`get_reward`, `get_alive`, `set_action` per team handle); its PettingZoo wrapper turns them
into dicts keyed by agent name every step. `MAgentSlots` reads the arrays instead: one slot
group per team (named after the team: "red", "blue"), a slot per agent of the team at reset
(dead agents leave by mask), observations flattened to a Box so that the policies are fully
connected ones (the NumPy actor, not torch, then computes their actions).

    from magent2.environments import battle_v4
    register_env("battle", lambda ctx: MAgentSlots(battle_v4.parallel_env(map_size=30, max_cycles=200)))

This module imports nothing of magent2 itself; `import rlfleet` does not import it.
"""
from __future__ import annotations

from typing import Any, Dict, List

import gymnasium as gym
import numpy as np

from rlfleet.env.vector_multi_agent_env import SlotGroup, SlotMultiAgentEnv, SlotReset, SlotStep


class MAgentSlots(SlotMultiAgentEnv):
    """A MAgent2 parallel env (e.g. `battle_v4.parallel_env(...)`) through the slot API.

    Args:
        env: the magent2 parallel env (its `env` attribute is the grid world). Each team's
            slots are its agents at construction, `possible_agents` order ("red_0", ...).
    """

    def __init__(self, env: Any):
        self.penv = env
        self.world = env.env
        self.handles = list(env.handles)
        agents = list(env.possible_agents)
        names: List[str] = []
        for aid in agents:
            team = aid.rsplit("_", 1)[0]
            if team not in names:
                names.append(team)
        if len(names) != len(self.handles):
            raise ValueError(f"MAgentSlots: {len(self.handles)} team handles but agent names of {len(names)} teams "
                             f"({names})")
        self.slot_groups = {}
        self._offsets: List[int] = []
        offset = 0
        for team in names:
            members = tuple(a for a in agents if a.rsplit("_", 1)[0] == team)
            space = env.observation_space(members[0])
            flat = gym.spaces.Box(space.low.reshape(-1), space.high.reshape(-1), dtype=np.float32)
            self.slot_groups[team] = SlotGroup(members, flat, env.action_space(members[0]))
            self._offsets.append(offset)
            offset += len(members)
        self._init_spaces()
        self._frames = 0

    def reset_slots(self, *, seed=None, options=None) -> SlotReset:
        penv = self.penv
        if seed is not None:
            penv.seed(seed)
        self.world.reset()
        penv.generate_map()
        self._frames = 0
        obs, alive = self._observe()
        return SlotReset(obs, alive)

    def _observe(self):
        """Per team: the flattened views `[S, ...]` (zeros in dead slots) and the live mask.
        The grid world lists agents by global id; a team's slot is its id minus the team's offset."""
        obs, alive = {}, {}
        for (team, group), handle, offset in zip(self.slot_groups.items(), self.handles, self._offsets):
            ids = self.world.get_agent_id(handle) - offset
            view, _ = self.world.get_observation(handle)
            o = np.zeros((group.num_slots, *group.observation_space.shape), np.float32)
            o[ids] = view.reshape(len(ids), -1)
            a = np.zeros(group.num_slots, bool)
            a[ids] = self.world.get_alive(handle)
            obs[team], alive[team] = o, a
        return obs, alive

    def step_slots(self, actions: Dict[str, np.ndarray]) -> SlotStep:
        world = self.world
        live_ids = []
        for (team, _), handle, offset in zip(self.slot_groups.items(), self.handles, self._offsets):
            ids = world.get_agent_id(handle) - offset
            world.set_action(handle, np.ascontiguousarray(actions[team][ids], np.int32))
            live_ids.append(ids)
        finished = bool(world.step())
        self._frames += 1
        truncated = self._frames >= self.penv.max_cycles
        obs, alive = self._observe()
        rewards, terms, truncs = {}, {}, {}
        for (team, group), handle, ids in zip(self.slot_groups.items(), self.handles, live_ids):
            r = np.zeros(group.num_slots, np.float32)
            r[ids] = world.get_reward(handle)
            died = np.zeros(group.num_slots, bool)
            died[ids] = ~alive[team][ids]
            # As the PettingZoo wrapper: a finished battle terminates every agent still in it.
            terms[team] = died | (finished & np.isin(np.arange(group.num_slots), ids))
            truncs[team] = (alive[team] & truncated) & ~terms[team]
            rewards[team] = r
            alive[team] = alive[team] & ~terms[team] & ~truncs[team]
        world.clear_dead()
        return SlotStep(obs, rewards, terms, truncs, alive, finished, truncated and not finished)

    def render(self):
        return self.penv.render()

    def close(self):
        self.penv.close()


__all__ = ["MAgentSlots"]
