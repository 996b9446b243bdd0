"""The acting protocol: `policy.actor(explore, timestep)` gives an `Actor` that the samplers
(and anything else stepping envs) call, and nothing else.

An actor acts for one stretch of sampling (a chunk of the single-agent sampler, one
`sample()` of the multi-agent one): `act(obs)` returns what the next env step needs, plus
the per-step columns known at once; `finish()` returns the columns it deferred (action
log-likelihoods and probabilities, value predictions) for every row `act` gave since the
last `finish()`, computed in one vectorised pass with the weights those rows acted with.

Two backends: `TorchActor` (here) acts through the policy's `compute_actions` and defers
nothing, so it works for every policy (recurrent and custom models, Q-policies, any
exploration, subclasses that act their own way); `NumpyActor` (policy/numpy_actor.py) runs a
NumPy copy of a fully connected policy (see rlfleet/fast/inference.py), the samplers' hot
path. `TorchPolicy.actor` chooses between them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

# What `act` returns: `(actions [B, ...], state_outs [[B, ...], ...], extra columns {name: [B, ...]})`.
ActResult = Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]


class Actor(ABC):
    """Acts for one policy over one stretch of sampling (see the module docstring).

    Attributes:
        backend: "torch" or "numpy".
        deferred: the names of the columns `finish()` returns (each one float32 per row);
            `act` returns every other column at once.
    """

    backend: str = ""
    deferred: Tuple[str, ...] = ()

    @abstractmethod
    def act(self, obs: np.ndarray, state: Optional[Sequence[np.ndarray]] = None, prev_actions=None,
            prev_rewards=None, timestep: Optional[int] = None) -> ActResult:
        """Actions for a batch of (preprocessed, filtered) observations.

        Args:
            obs: `[B, ...]`.
            state: recurrent policies: the state going in, one `[B, ...]` array per tensor.
            prev_actions: recurrent policies: the previous actions `[B, ...]`.
            prev_rewards: recurrent policies: the previous rewards `[B]`.
            timestep: this step's global timestep (exploration schedules); default: the
                policy's `global_timestep` plus the steps since the actor's first one (the
                actor's `timestep`, advanced by the rows of each call).
        """

    def finish(self, rows: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
        """The `deferred` columns of every row `act` gave since the last call, in the order
        acted on (`{}` when nothing is deferred); with `rows` (int indices into those rows,
        ascending), of those rows only: the others are not computed (a sampler's rows that
        no batch keeps, such as its dead agent slots')."""
        return {}


class TorchActor(Actor):
    """Acts through `policy.compute_actions`, step by step, deferring nothing: the backend
    every policy has.

    Args:
        policy: the acting policy.
        explore: sample (True), act greedily (False), or None: the policy's `explore`.
        timestep: the global timestep of the first step.
    """

    backend = "torch"

    def __init__(self, policy, explore: Optional[bool], timestep: int):
        self.policy = policy
        self.explore = explore
        # Steps past the policy's global timestep: what a sampler's `steps_since_sync` adds.
        self._since = timestep - policy.global_timestep

    def act(self, obs: np.ndarray, state: Optional[Sequence[np.ndarray]] = None, prev_actions=None,
            prev_rewards=None, timestep: Optional[int] = None) -> ActResult:
        policy = self.policy
        if timestep is None:
            timestep = policy.global_timestep + self._since
            self._since += len(obs)
        return policy.compute_actions(obs, state, prev_actions, prev_rewards, explore=self.explore,
                                      timestep=timestep)


__all__ = ["Actor", "ActResult", "TorchActor"]
