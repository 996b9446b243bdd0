"""The vectorised multi-agent env API: agents as fixed slots, observations as arrays.

A `SlotMultiAgentEnv` lays its agents out in named groups of slots (`SlotGroup`: the agent
ids in slot order and the one observation / action space they share). Its `reset_slots` and
`step_slots` speak arrays per group: observations `[S, ...]`, rewards, terminated and
truncated flags `[S]`, and an `alive` mask `[S]` saying which slots act next (agents join
and leave by mask; a dead slot's entries are ignored). No dict per agent, no object per
agent: the cost of a step does not grow with Python work per agent.

A `SlotMultiAgentEnv` is also a `MultiAgentEnv` (the dict API, derived from the arrays), so
every part of rlfleet that takes a MultiAgentEnv takes it; the RolloutWorker then samples it
with the vectorised multi-agent sampler (rollout/vector_multi_agent_sampler.py) where the
config allows (`vector_sampler_unavailable` says why not otherwise).

`VectorMultiAgentEnv` steps the `num_envs_per_worker` sub-envs of a worker together: arrays
`[num_envs, S, ...]` per group.

Adapters and native envs:

- `DictSlotAdapter`: any MultiAgentEnv with a fixed set of `possible_agents` (PettingZoo
  Parallel envs through `ParallelPettingZooEnv`), one dict step per sub-env.
- `SlotCopies`: `num_agents` copies of a Gymnasium env (the array twin of `make_multi_agent`:
  agent i runs copy i and leaves when it ends; the episode ends when all have).
- rlfleet.env.examples.cue_swarm.CueSwarm: a synthetic env with hundreds of agent slots.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np

from rlfleet.env.multi_agent_env import ALL, AgentID, MultiAgentEnv

Arrays = Dict[str, np.ndarray]


@dataclass(frozen=True)
class SlotGroup:
    """One group of agent slots: `agents[k]` is the agent id of slot k; all share the spaces."""

    agents: Tuple[AgentID, ...]
    observation_space: gym.Space
    action_space: gym.Space

    @property
    def num_slots(self) -> int:
        return len(self.agents)


class SlotReset(NamedTuple):
    """The first observations of an episode, per group: `obs [S, ...]`, `alive [S]`."""

    obs: Arrays
    alive: Arrays


class SlotStep(NamedTuple):
    """One step's outcome, per group (`[S]` or `[S, ...]`; `[N, S, ...]` from a
    `VectorMultiAgentEnv`). `obs` holds each slot's observation after the step (its final
    one where it left); `alive` the slots that act next; `terminated_all` / `truncated_all`
    end the episode (bool; `[N]` from a `VectorMultiAgentEnv`)."""

    obs: Arrays
    rewards: Arrays
    terminateds: Arrays
    truncateds: Arrays
    alive: Arrays
    terminated_all: Any
    truncated_all: Any


def _obs_dtype(space: gym.Space) -> np.dtype:
    return np.dtype(np.uint8) if space.dtype == np.uint8 else np.dtype(np.float32)


def _zeros(group: SlotGroup, lead: Tuple[int, ...] = ()) -> np.ndarray:
    space = group.observation_space
    return np.zeros((*lead, group.num_slots, *space.shape), _obs_dtype(space))


class SlotMultiAgentEnv(MultiAgentEnv):
    """Base class of envs with the slot API (see the module docstring).

    Subclasses set `slot_groups` and implement `reset_slots` and `step_slots`; the dict API
    (`reset` / `step`) comes from them, so the env works on every multi-agent path.

    Attributes:
        slot_groups: group name -> `SlotGroup` (the slot layout; fixed for the env's life).
    """

    slot_groups: Dict[str, SlotGroup] = {}

    def reset_slots(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> SlotReset:
        """Starts an episode; the first observations and the slots that act first."""
        raise NotImplementedError  # abstract

    def step_slots(self, actions: Arrays) -> SlotStep:
        """Applies `actions[group] [S, ...]` (only the live slots' entries count)."""
        raise NotImplementedError  # abstract

    @classmethod
    def step_many(cls, envs: Sequence["SlotMultiAgentEnv"], actions: Arrays) -> SlotStep:
        """Steps `envs` (all of this class) with `actions[group] [len(envs), S, ...]`: the
        outcome as `[len(envs), S, ...]` arrays. This default stacks each env's `step_slots`;
        a class whose copies can be stepped in one loop overrides it (see `SlotCopies`)."""
        outs = [env.step_slots({g: a[i] for g, a in actions.items()}) for i, env in enumerate(envs)]
        groups = envs[0].slot_groups
        cols = [{g: np.stack([o[c][g] for o in outs]) for g in groups} for c in range(5)]
        return SlotStep(*cols, np.array([o.terminated_all for o in outs], bool),
                        np.array([o.truncated_all for o in outs], bool))

    # --- spaces for the dict API and the worker's policy-space inference -----------------
    def _init_spaces(self) -> None:
        """Sets `possible_agents` and the per-agent spaces from `slot_groups` (call it once
        `slot_groups` is set)."""
        groups = self.slot_groups.values()
        self.possible_agents = [a for g in groups for a in g.agents]
        self.observation_spaces = {a: g.observation_space for g in groups for a in g.agents}
        self.action_spaces = {a: g.action_space for g in groups for a in g.agents}
        obs = list(self.observation_spaces.values())
        act = list(self.action_spaces.values())
        self.observation_space = obs[0] if all(s == obs[0] for s in obs) else None
        self.action_space = act[0] if all(s == act[0] for s in act) else None

    # --- the dict API, derived from the arrays ----------------------------------------------
    def reset(self, *, seed=None, options=None):
        first = self.reset_slots(seed=seed, options=options)
        self._dict_alive = {g: a.copy() for g, a in first.alive.items()}
        obs = {}
        for name, group in self.slot_groups.items():
            for k in np.flatnonzero(first.alive[name]):
                obs[group.agents[k]] = first.obs[name][k]
        return obs, {a: {} for a in obs}

    def step(self, action_dict):
        actions = {}
        for name, group in self.slot_groups.items():
            space = group.action_space
            arr = np.zeros((group.num_slots, *space.shape), space.dtype if space.dtype is not None else np.float32)
            for k, aid in enumerate(group.agents):
                if aid in action_dict:
                    arr[k] = action_dict[aid]
            actions[name] = arr
        out = self.step_slots(actions)
        obs, rew, term, trunc = {}, {}, {}, {}
        for name, group in self.slot_groups.items():
            before, after = self._dict_alive[name], out.alive[name]
            for k in np.flatnonzero(before | after):
                aid = group.agents[k]
                obs[aid] = out.obs[name][k]
                rew[aid] = float(out.rewards[name][k])
                term[aid] = bool(out.terminateds[name][k])
                trunc[aid] = bool(out.truncateds[name][k])
            self._dict_alive[name] = after.copy()
        term[ALL], trunc[ALL] = bool(out.terminated_all), bool(out.truncated_all)
        return obs, rew, term, trunc, {a: {} for a in obs}


class DictSlotAdapter(SlotMultiAgentEnv):
    """A MultiAgentEnv (e.g. a PettingZoo Parallel env, through `ParallelPettingZooEnv`) seen
    through the slot API: one group per distinct pair of spaces, in `possible_agents` order.

    Args:
        env: the env; it must list `possible_agents` (the slots) and give each a space.
        group_names: optional function `(agent id, index of its group) -> group name`
            (default: "agents" when all agents share their spaces, else "group<k>").
    """

    def __init__(self, env: MultiAgentEnv, group_names: Optional[Callable[[AgentID, int], str]] = None):
        agents = list(getattr(env, "possible_agents", None) or [])
        if not agents:
            raise ValueError(f"DictSlotAdapter needs an env that lists its possible_agents; {type(env).__name__} "
                             "lists none (set possible_agents, or sample it through the general multi-agent path)")
        self.env = env
        pairs: List[Tuple[gym.Space, gym.Space]] = []
        members: List[List[AgentID]] = []
        for aid in agents:
            pair = (env.observation_space_for(aid), env.action_space_for(aid))
            if pair[0] is None or pair[1] is None:
                raise ValueError(f"DictSlotAdapter: agent {aid!r} of {type(env).__name__} has no observation or action "
                                 "space; give the env observation_spaces / action_spaces")
            if pair not in pairs:
                pairs.append(pair)
                members.append([])
            members[pairs.index(pair)].append(aid)
        self.slot_groups = {}
        for k, (pair, ids) in enumerate(zip(pairs, members)):
            name = group_names(ids[0], k) if group_names else ("agents" if len(pairs) == 1 else f"group{k}")
            self.slot_groups[name] = SlotGroup(tuple(ids), pair[0], pair[1])
        self._where = {aid: (name, k) for name, g in self.slot_groups.items() for k, aid in enumerate(g.agents)}
        self._alive = {name: np.zeros(g.num_slots, bool) for name, g in self.slot_groups.items()}
        self._last_obs = {name: _zeros(g) for name, g in self.slot_groups.items()}
        self._init_spaces()

    def reset(self, *, seed=None, options=None):
        # The wrapped env's own dict API (the general sampler runs it unchanged).
        return self.env.reset(seed=seed, options=options)

    def step(self, action_dict):
        return self.env.step(action_dict)

    def reset_slots(self, *, seed=None, options=None) -> SlotReset:
        obs, _ = self.env.reset(seed=seed, options=options)
        for name in self.slot_groups:
            self._alive[name] = np.zeros_like(self._alive[name])
            self._last_obs[name] = np.zeros_like(self._last_obs[name])
        self._write_obs(obs)
        return SlotReset({n: o.copy() for n, o in self._last_obs.items()}, {n: a.copy() for n, a in self._alive.items()})

    def step_slots(self, actions: Arrays) -> SlotStep:
        action_dict = {}
        for name, group in self.slot_groups.items():
            acts = actions[name]
            for k in np.flatnonzero(self._alive[name]):
                action_dict[group.agents[k]] = acts[k]
        obs, rew, term, trunc, _ = self.env.step(action_dict)
        out_rew = {n: np.zeros(g.num_slots, np.float32) for n, g in self.slot_groups.items()}
        out_term = {n: np.zeros(g.num_slots, bool) for n, g in self.slot_groups.items()}
        out_trunc = {n: np.zeros(g.num_slots, bool) for n, g in self.slot_groups.items()}
        where = self._where
        for aid, r in rew.items():
            name, k = where[aid]
            out_rew[name][k] = r
        self._write_obs(obs)
        for flags, out in ((term, out_term), (trunc, out_trunc)):
            for aid, flag in flags.items():
                if aid != ALL and flag:
                    name, k = where[aid]
                    out[name][k] = True
                    self._alive[name][k] = False
        term_all, trunc_all = bool(term.get(ALL, False)), bool(trunc.get(ALL, False))
        return SlotStep({n: o.copy() for n, o in self._last_obs.items()}, out_rew, out_term, out_trunc,
                        {n: a.copy() for n, a in self._alive.items()}, term_all, trunc_all)

    def _write_obs(self, obs: Dict[AgentID, Any]) -> None:
        where = self._where
        for aid, o in obs.items():
            if aid not in where:
                raise ValueError(f"DictSlotAdapter: the env returned an observation for agent {aid!r}, which is not "
                                 f"one of its possible_agents {list(where)}")
            name, k = where[aid]
            self._last_obs[name][k] = o
            self._alive[name][k] = True

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


class SlotCopies(SlotMultiAgentEnv):
    """`num_agents` copies of a Gymnasium env as slots of one group "agents" (agent ids
    `0..num_agents-1`): the array twin of `make_multi_agent` (same seeds, same episode ends).

    Args:
        env: a Gymnasium id or `config -> gym.Env`.
        config: `num_agents` (default 2); the rest goes to a creator.
    """

    def __init__(self, env: Union[str, Callable[[dict], gym.Env]], config: Optional[dict] = None):
        config = dict(config or {})
        num = int(config.pop("num_agents", 2))
        self.envs = [gym.make(env) if isinstance(env, str) else env(config) for _ in range(num)]
        first = self.envs[0]
        self.slot_groups = {"agents": SlotGroup(tuple(range(num)), first.observation_space, first.action_space)}
        self._init_spaces()
        self._int_actions = isinstance(first.action_space, gym.spaces.Discrete)
        self._dtype = _obs_dtype(first.observation_space)
        # Per copy, as Python lists (one loop over all copies reads them: `step_many`).
        self._last: List[Any] = [np.zeros(first.observation_space.shape, self._dtype)] * num
        self._alive: List[bool] = [False] * num
        self._terminated: List[bool] = [False] * num
        self._num_live = 0  # copies alive (`_alive` true)

    def reset_slots(self, *, seed=None, options=None) -> SlotReset:
        for i, env in enumerate(self.envs):
            # Distinct, reproducible seeds per copy from one episode seed (as make_multi_agent).
            self._last[i], _ = env.reset(seed=None if seed is None else seed + 7919 * i, options=options)
        n = len(self.envs)
        self._alive, self._terminated, self._num_live = [True] * n, [False] * n, n
        return SlotReset({"agents": np.asarray(self._last, self._dtype)}, {"agents": np.ones(n, bool)})

    def step_slots(self, actions: Arrays) -> SlotStep:
        out = self.step_many([self], {g: a[None] for g, a in actions.items()})
        return SlotStep(*({g: a[0] for g, a in col.items()} for col in out[:5]), bool(out.terminated_all[0]),
                        bool(out.truncated_all[0]))

    @classmethod
    def step_many(cls, envs: Sequence["SlotCopies"], actions: Arrays) -> SlotStep:
        """One loop over every live copy of every env, writing Python lists converted to
        arrays once: a dead copy costs nothing, a live one an item write (its rare end a few)."""
        acts = actions["agents"]
        acts = acts.tolist() if envs[0]._int_actions else acts  # Python ints, as a plain Gymnasium loop
        num = len(envs[0].envs)
        rew = [0.0] * (len(envs) * num)
        ends: List[Tuple[int, bool, bool]] = []  # (flat slot, terminated, truncated) of the copies that end
        obs: List[Any] = []
        alive: List[bool] = []
        over: List[int] = []  # the envs with no live copy left
        for i, env in enumerate(envs):
            last, live, terminated, acts_i = env._last, env._alive, env._terminated, acts[i]
            base = i * num
            for k, copy in enumerate(env.envs):
                if live[k]:
                    o, r, te, tr, _ = copy.step(acts_i[k])
                    last[k] = o
                    rew[base + k] = r
                    if te or tr:
                        live[k] = False
                        terminated[k] = bool(te)
                        env._num_live -= 1
                        ends.append((base + k, bool(te), bool(tr)))
            obs.extend(last)
            alive.extend(live)
            if not env._num_live:
                over.append(i)
        shape = (len(envs), num)
        term, trunc = np.zeros(shape, bool), np.zeros(shape, bool)
        for j, te, tr in ends:
            term.flat[j], trunc.flat[j] = te, tr
        term_all, trunc_all = np.zeros(len(envs), bool), np.zeros(len(envs), bool)
        for i in over:  # over: terminated when every copy was, else truncated
            if all(envs[i]._terminated):
                term_all[i] = True
            else:
                trunc_all[i] = True
        obs_shape = envs[0].slot_groups["agents"].observation_space.shape
        return SlotStep({"agents": np.asarray(obs, envs[0]._dtype).reshape(*shape, *obs_shape)},
                        {"agents": np.asarray(rew, np.float32).reshape(shape)}, {"agents": term},
                        {"agents": trunc}, {"agents": np.asarray(alive, bool).reshape(shape)}, term_all, trunc_all)

    def render(self):
        return self.envs[0].render()

    def close(self):
        for env in self.envs:
            env.close()


class VectorMultiAgentEnv:
    """The slot envs of one worker, stepped together: arrays `[num_envs, S, ...]` per group.

    It never resets a sub-env on its own: the sampler decides when an episode is over (the
    env's `__all__` flags and the config's episode rules) and calls `reset_at`.

    Args:
        envs: the sub-envs (the same slot layout each).
        seeds: one seed per sub-env for its first reset (None: unseeded); or a function
            `index -> seed` asked at every reset (the worker's MultiAgentVectorEnv hands
            out its seeds so).
    """

    def __init__(self, envs: Sequence[SlotMultiAgentEnv],
                 seeds: Union[None, Sequence[Optional[int]], Callable[[int], Optional[int]]] = None):
        if not envs:
            raise ValueError("VectorMultiAgentEnv needs at least one env")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.groups: Dict[str, SlotGroup] = dict(self.envs[0].slot_groups)
        for i, env in enumerate(self.envs):
            if env.slot_groups != self.groups:
                raise ValueError(f"Sub-env {i} has the slot layout {env.slot_groups}, sub-env 0 {self.groups}; "
                                 "the sub-envs of a VectorMultiAgentEnv must share one")
        kinds = {type(env) for env in self.envs}
        self._step_many = kinds.pop().step_many if len(kinds) == 1 else SlotMultiAgentEnv.step_many
        if callable(seeds):
            self._seed_of = seeds
        else:
            pending = list(seeds) if seeds is not None else [None] * self.num_envs

            def take(i: int) -> Optional[int]:
                seed, pending[i] = pending[i], None
                return seed
            self._seed_of = take

    def reset_at(self, index: int) -> SlotReset:
        """Resets sub-env `index` (seeded on its first reset)."""
        return self.envs[index].reset_slots(seed=self._seed_of(index))

    def step(self, actions: Arrays) -> SlotStep:
        """Steps every sub-env with `actions[group] [num_envs, S, ...]`: one `step_many`
        call when they are all of one class."""
        return self._step_many(self.envs, actions)

    def close(self) -> None:
        for env in self.envs:
            env.close()


__all__ = ["DictSlotAdapter", "SlotCopies", "SlotGroup", "SlotMultiAgentEnv", "SlotReset", "SlotStep",
           "VectorMultiAgentEnv"]
