"""VMAS scenarios as slot envs: VMAS's batched torch tensors handed to the slot arrays.

VMAS (`pip install vmas`; not an rlfleet extra, it pulls gym 0.26) is vectorised already:
one `vmas.make_env(scenario, num_envs=N)` steps N copies of a scenario in torch, with one
tensor `[N, ...]` per agent. A worker's `num_envs_per_worker` sub-envs are therefore *views*
of one VMAS env: `VmasSlots` is sub-env `index` of a `VmasBatch`, and the class method
`step_many` (which `VectorMultiAgentEnv` calls with all of a worker's sub-envs) makes one
`step` of the VMAS env for all of them: the per-agent tensors are stacked into the groups'
`[N, S, ...]` arrays, no Python loop over sub-envs.

    from rlfleet import register_env
    from rlfleet.env.vmas_slots import VmasCreator
    register_env("dispersion", VmasCreator("dispersion", continuous_actions=False, n_agents=64, max_steps=100))

`VmasCreator` builds the views for the worker (`env_config` entries go to `make_env` too, as
scenario arguments); the VMAS env itself is made at the first reset, sized to the views made
until then. A seeded reset of a view (the worker seeds each sub-env's first one
from the config's `seed`) reseeds VMAS's random stream, shared by all of the batch's
sub-envs. Agents never leave a VMAS episode: every slot is alive until the sub-env's
episode ends (VMAS's `terminated` / `truncated` flags, `max_steps` for the latter), when the
sampler resets that sub-env alone (`reset_at`).

Slot groups: one per distinct pair of (observation, action) spaces in VMAS's agent order,
"agents" when all share theirs (else "group<k>"); agent ids are VMAS's agent names.

A view steps only together with the other views of its batch: stepping one alone through
the dict API (the general multi-agent path) works for a batch of one sub-env and raises
otherwise. This module imports vmas only when a VMAS env is made; `import rlfleet` does not.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.env.env_context import EnvContext
from rlfleet.env.vector_multi_agent_env import SlotGroup, SlotMultiAgentEnv, SlotReset, SlotStep

INSTALL_HINT = "pip install vmas  (it is not an rlfleet extra: it pulls gym 0.26)"


def import_vmas():
    """The `vmas` module; ImportError naming the pip command when it is missing."""
    try:
        import vmas
    except ImportError as e:
        raise ImportError(f"VMAS scenarios need the vmas package: {INSTALL_HINT}") from e
    return vmas


def _gymnasium_space(space: Any, what: str) -> gym.Space:
    """VMAS's gym 0.26 space as the Gymnasium one (Box, Discrete, MultiDiscrete)."""
    kind = type(space).__name__
    if kind == "Box":
        return gym.spaces.Box(np.asarray(space.low, np.float32), np.asarray(space.high, np.float32),
                              dtype=np.float32)
    if kind == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.asarray(space.nvec))
    raise ValueError(f"VmasSlots: the {what} space {space} is a {kind}; the slot API takes Box, Discrete or "
                     "MultiDiscrete spaces (make the VMAS env with dict_spaces=False and flat observations)")


class VmasBatch:
    """One VMAS env of `num_envs` sub-envs and its views (`VmasSlots`), one per sub-env.

    Args:
        scenario: a VMAS scenario name (e.g. "dispersion") or `BaseScenario`.
        make_kwargs: further `vmas.make_env` arguments (`continuous_actions`, `max_steps`,
            scenario arguments such as `n_agents`); `num_envs`, `seed`, `device`,
            `dict_spaces` and `terminated_truncated` are set here.
        device: the torch device VMAS simulates on ("cpu").
    """

    def __init__(self, scenario: Any, make_kwargs: Optional[dict] = None, device: str = "cpu"):
        self.scenario = scenario
        self.make_kwargs = dict(make_kwargs or {})
        for key in ("num_envs", "seed", "dict_spaces", "terminated_truncated"):
            if key in self.make_kwargs:
                raise ValueError(f"VmasBatch: {key}={self.make_kwargs[key]!r} cannot be set; the adapter sets it "
                                 "(num_envs is num_envs_per_worker, seeds come from the config's 'seed')")
        self.device = device
        self.views: List["VmasSlots"] = []
        self.env: Any = None  # the VMAS env, made at the first reset (`materialise`)
        # The slot layout, read from a one-env probe so that views exist before the batch.
        probe = self._make(1, None)
        self.groups, self.members = self._layout(probe)

    def _make(self, num_envs: int, seed: Optional[int]) -> Any:
        vmas = import_vmas()
        return vmas.make_env(self.scenario, num_envs=num_envs, device=self.device, seed=seed, dict_spaces=False,
                             terminated_truncated=True, **self.make_kwargs)

    @staticmethod
    def _layout(env: Any) -> Tuple[Dict[str, SlotGroup], Dict[str, List[int]]]:
        """Groups of agents with equal spaces, in VMAS's agent order; `members[g]` their indices."""
        names = [agent.name for agent in env.agents]
        pairs: List[Tuple[gym.Space, gym.Space]] = []
        members: List[List[int]] = []
        for j, name in enumerate(names):
            pair = (_gymnasium_space(env.observation_space[j], f"observation (agent {name!r})"),
                    _gymnasium_space(env.action_space[j], f"action (agent {name!r})"))
            if pair not in pairs:
                pairs.append(pair)
                members.append([])
            members[pairs.index(pair)].append(j)
        groups, where = {}, {}
        for k, (pair, idx) in enumerate(zip(pairs, members)):
            name = "agents" if len(pairs) == 1 else f"group{k}"
            groups[name] = SlotGroup(tuple(names[j] for j in idx), pair[0], pair[1])
            where[name] = idx
        return groups, where

    def add_view(self) -> "VmasSlots":
        """A view of the next sub-env (before the VMAS env is made)."""
        if self.env is not None:
            raise ValueError(f"VmasBatch: its VMAS env of {len(self.views)} sub-envs is made already; a view cannot "
                             "join it any more")
        view = VmasSlots(self, len(self.views))
        self.views.append(view)
        return view

    def materialise(self, seed: Optional[int]) -> None:
        """Makes the VMAS env of `len(views)` sub-envs (seeded with `seed`), once."""
        if self.env is None:
            self.env = self._make(len(self.views), seed)

    # --- VMAS tensors -> slot arrays ---------------------------------------------------------
    def per_group(self, tensors: Sequence[Any], dtype: np.dtype) -> Dict[str, np.ndarray]:
        """Per group, its agents' tensors `[N, ...]` stacked into one array `[N, S, ...]`."""
        import torch

        return {g: torch.stack([tensors[j] for j in idx], dim=1).numpy().astype(dtype, copy=False)
                for g, idx in self.members.items()}

    def observations(self, obs: Sequence[Any]) -> Dict[str, np.ndarray]:
        return self.per_group(obs, np.float32)

    def to_vmas_actions(self, actions: Dict[str, np.ndarray]) -> List[Any]:
        """The groups' `[N, S, ...]` actions as VMAS's list of per-agent tensors `[N, d]`."""
        import torch

        out: List[Any] = [None] * sum(len(idx) for idx in self.members.values())
        for g, idx in self.members.items():
            acts = torch.from_numpy(np.ascontiguousarray(actions[g]))
            if acts.dim() == 2:  # Discrete: one int per agent; VMAS takes [N, 1]
                acts = acts.unsqueeze(-1)
            for j, column in zip(idx, acts.unbind(1)):
                out[j] = column
        return out


class VmasSlots(SlotMultiAgentEnv):
    """Sub-env `index` of a `VmasBatch` through the slot API (see the module docstring).

    Args:
        batch: the VMAS batch this view belongs to.
        index: the sub-env's index in it.
    """

    def __init__(self, batch: VmasBatch, index: int):
        self.batch = batch
        self.index = index
        self.slot_groups = dict(batch.groups)
        self._init_spaces()

    @classmethod
    def make_batch(cls, scenario: Any, num_envs: int, **make_kwargs: Any) -> List["VmasSlots"]:
        """`num_envs` views of one new VMAS env (`make_kwargs` go to `vmas.make_env`)."""
        batch = VmasBatch(scenario, make_kwargs)
        return [batch.add_view() for _ in range(num_envs)]

    def reset_slots(self, *, seed=None, options=None) -> SlotReset:
        batch = self.batch
        # The first reset makes the VMAS env, seeded with the seed of that reset's sub-env; a
        # later seeded reset reseeds VMAS's random stream, which all its sub-envs share.
        if batch.env is None:
            batch.materialise(seed)
        elif seed is not None:
            batch.env.seed(seed)
        obs = batch.observations(batch.env.reset_at(self.index))
        return SlotReset({g: o[self.index] for g, o in obs.items()},
                         {g: np.ones(group.num_slots, bool) for g, group in self.slot_groups.items()})

    def step_slots(self, actions) -> SlotStep:
        if len(self.batch.views) != 1:
            raise ValueError(f"VmasSlots: sub-env {self.index} is one of {len(self.batch.views)} views of a VMAS env, "
                             "which step together (the vectorised multi-agent sampler); the general multi-agent "
                             "path steps sub-envs one at a time. Use num_envs_per_worker: 1 there, or settings the "
                             "vectorised sampler takes (the warning that chose the general path says which)")
        out = self.step_many([self], {g: a[None] for g, a in actions.items()})
        return SlotStep(*({g: a[0] for g, a in col.items()} for col in out[:5]), bool(out.terminated_all[0]),
                        bool(out.truncated_all[0]))

    @classmethod
    def step_many(cls, envs: Sequence["VmasSlots"], actions) -> SlotStep:
        """One VMAS step of the whole batch: `envs` must be its views, in order."""
        batch = envs[0].batch
        if batch.env is None or list(envs) != batch.views:
            raise ValueError("VmasSlots.step_many needs all the views of one VMAS batch, in sub-env order, after "
                             "their first reset")
        obs, rewards, terminated, truncated, _ = batch.env.step(batch.to_vmas_actions(actions))
        n = len(envs)
        term = terminated.numpy().astype(bool)
        trunc = truncated.numpy().astype(bool) & ~term
        over = term | trunc
        shapes = {g: (n, group.num_slots) for g, group in batch.groups.items()}
        return SlotStep(batch.observations(obs), batch.per_group(rewards, np.float32),
                        {g: np.broadcast_to(term[:, None], s).copy() for g, s in shapes.items()},
                        {g: np.broadcast_to(trunc[:, None], s).copy() for g, s in shapes.items()},
                        {g: np.broadcast_to(~over[:, None], s).copy() for g, s in shapes.items()},
                        term, trunc)

    def render(self):
        return self.batch.env.render(env_index=self.index, mode="rgb_array")

    def close(self):
        pass  # the VMAS env holds no resources beyond its tensors


class VmasCreator:
    """An env creator (`register_env(name, VmasCreator(...))`) of VMAS views: a worker's
    sub-env 0 starts a new batch, its sub-envs 1, 2, ... join it (the worker makes them in
    order); `env_config` entries go to `vmas.make_env` with `make_kwargs`.

    Args:
        scenario: a VMAS scenario name or `BaseScenario`.
        make_kwargs: `vmas.make_env` arguments (e.g. `continuous_actions=False`,
            `max_steps=100`, `n_agents=64`).
    """

    def __init__(self, scenario: Any, **make_kwargs: Any):
        import_vmas()  # fail at registration, with the pip command, when vmas is missing
        self.scenario = scenario
        self.make_kwargs = make_kwargs
        self._batch: Optional[VmasBatch] = None

    def __call__(self, ctx: Optional[EnvContext] = None) -> VmasSlots:
        ctx = ctx if ctx is not None else EnvContext()
        index = ctx.vector_index
        if index == 0:
            self._batch = VmasBatch(self.scenario, {**self.make_kwargs, **ctx})
        elif self._batch is None or len(self._batch.views) != index:
            raise ValueError(f"VmasCreator: sub-env {index} asked for before sub-env "
                             f"{0 if self._batch is None else len(self._batch.views)}; a worker's VMAS views are "
                             "made in order, sub-env 0 first")
        return self._batch.add_view()

    def __getstate__(self) -> dict:
        # Remote workers get the recipe, not this process's batch.
        return {**self.__dict__, "_batch": None}


__all__ = ["VmasBatch", "VmasCreator", "VmasSlots", "import_vmas"]
