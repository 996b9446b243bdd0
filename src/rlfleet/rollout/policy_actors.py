"""The actors (policy/actor.py) the multi-agent sampler's policies act through during one
`sample()`: one per policy, made at its first step; `finish()` fills in the columns they
deferred, split back into each acting group's extra outputs dict (which its rows read)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np


class PolicyActors:
    """`act` for any of a worker's policies; `finish` once the weights may change or a batch
    is built.

    Args:
        defer: whether actors may defer columns to `finish` (False where user code could
            read them per step: see where `MultiAgentSampler.__init__` builds these).
    """

    def __init__(self, defer: bool):
        self.defer = defer
        # id(policy) -> (policy, actor, [(extra outputs dict, rows), ...] or None where
        # the actor defers nothing); the policy is held so that its id stays its own.
        self._actors: Dict[int, Tuple[Any, Any, Optional[List[Tuple[dict, int]]]]] = {}

    def __len__(self) -> int:
        """How many policies acted since the last `finish`."""
        return len(self._actors)

    def act(self, policy, obs: np.ndarray, timestep: int, state: Optional[List[np.ndarray]] = None,
            prev_actions: Optional[np.ndarray] = None, prev_rewards: Optional[np.ndarray] = None
            ) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        """`(actions, state outputs, extra outputs)` of `policy` for `obs` (explore: each
        policy's own `explore`, since per-policy configs may differ); the deferred columns
        are added to the returned dict by `finish`. A recurrent policy is given its `state`
        and previous actions / rewards (rollout/agent_memory.py)."""
        acting = self._actors.get(id(policy))
        if acting is None:
            actor = policy.actor(None, timestep, defer=self.defer)
            acting = self._actors[id(policy)] = (policy, actor, [] if actor.deferred else None)
        acts, state_out, extra = acting[1].act(obs, state, prev_actions, prev_rewards, timestep=timestep)
        extra = dict(extra)
        if acting[2] is not None:
            acting[2].append((extra, len(acts)))
        return acts, state_out, extra

    def clear(self) -> None:
        """Drops the actors and their rows without finishing them (a sampler's restart)."""
        self._actors = {}

    def finish(self) -> None:
        """Per policy, one `finish()` over every row acted on since the last call."""
        actors, self._actors = self._actors, {}
        for _, actor, groups in actors.values():
            columns = actor.finish()
            start = 0
            for extra, rows in groups or ():
                for key, column in columns.items():
                    extra[key] = column[start:start + rows]
                start += rows


__all__ = ["PolicyActors"]
