"""Where each member's pieces sit in a group's flattened observation (QMIX, VDN).

A grouped env (`MultiAgentEnv.with_agent_groups`) gives the policy one Tuple observation per
step, one entry per member; the preprocessor flattens it into one row, and records the Tuple
as `original_space` on the Box the policy sees. A member's entry is either its observation
(any space the preprocessors flatten) or a Dict with:

- `"obs"`: what the member's Q-network sees (required in a Dict);
- `"state"`: the global state the mixer is conditioned on (optional; the members' states are
  concatenated, as RLlib 1.x's `qmix_policy.py` does); without it the mixer sees every member's `"obs"`;
- `"action_mask"` (`model.action_mask_key`): 1 = legal, 0 = illegal, one per action
  (optional).
"""
from __future__ import annotations

from typing import List, Optional

import gymnasium as gym
import numpy as np
import torch

from rlfleet.models.preprocessors import DictFlatteningPreprocessor, get_preprocessor

FLOAT_MIN = float(torch.finfo(torch.float32).min)


def _grouped_spaces(obs_space: gym.Space, action_space: gym.Space):
    """The members' observation spaces and their common number of actions, checked."""
    actions = getattr(action_space, "spaces", None)
    if not (isinstance(action_space, gym.spaces.Tuple) and actions
            and all(isinstance(a, gym.spaces.Discrete) for a in actions)
            and len({int(a.n) for a in actions}) == 1):
        raise ValueError(f"QMIX learns for a group of agents with Discrete actions of one size: its action space must "
                         f"be a gym.spaces.Tuple of equal Discrete spaces (an env grouped with "
                         f"`env.with_agent_groups(...)`), got {action_space}")
    original = getattr(obs_space, "original_space", obs_space)
    if not isinstance(original, gym.spaces.Tuple) or len(original.spaces) != len(actions):
        raise ValueError(f"QMIX needs a Tuple observation with one entry per member ({len(actions)} members, from "
                         f"`env.with_agent_groups(...)`), got {original}")
    return list(original.spaces), int(actions[0].n)


class GroupLayout:
    """Index arrays that pick each member's observation, action mask and the global state
    out of a flattened group observation.

    Args:
        obs_space: the flattened Box the policy sees (with `original_space`, the Tuple).
        action_space: a Tuple of equal Discrete spaces, one per member.
        mask_key: the action mask's key in a member's Dict (`model.action_mask_key`).

    Raises:
        ValueError: spaces that are not a group's, members of different observation sizes,
            a Dict without `"obs"` or with keys QMIX does not read, or a mask of the wrong size.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, mask_key: str = "action_mask"):
        members, self.num_actions = _grouped_spaces(obs_space, action_space)
        self.n_agents = len(members)
        obs_rows: List[np.ndarray] = []
        mask_rows: List[np.ndarray] = []
        state_rows: List[np.ndarray] = []
        offset = 0
        for i, space in enumerate(members):
            size = get_preprocessor(space).size
            if isinstance(space, gym.spaces.Dict):
                slices = DictFlatteningPreprocessor(space).column_slices()
                unknown = sorted(set(slices) - {"obs", "state", mask_key}, key=str)
                if "obs" not in slices or unknown:
                    raise ValueError(f"QMIX reads a member's Dict observation as 'obs' (required), 'state' and "
                                     f"{mask_key!r} (optional); member {i} has keys {sorted(slices, key=str)}")
                obs_rows.append(offset + np.arange(slices["obs"].start, slices["obs"].stop))
                if "state" in slices:
                    state_rows.append(offset + np.arange(slices["state"].start, slices["state"].stop))
                if mask_key in slices:
                    mask = slices[mask_key]
                    if mask.stop - mask.start != self.num_actions:
                        raise ValueError(f"member {i}'s action mask {mask_key!r} has {mask.stop - mask.start} "
                                         f"entries; its action space has {self.num_actions} actions (one entry each)")
                    mask_rows.append(offset + np.arange(mask.start, mask.stop))
            else:
                obs_rows.append(offset + np.arange(size))
            offset += size
        if len({len(r) for r in obs_rows}) != 1:
            raise ValueError(f"QMIX shares one Q-network among the members: their observations must have one size, "
                             f"got sizes {[len(r) for r in obs_rows]}")
        if mask_rows and len(mask_rows) != self.n_agents:
            raise ValueError("QMIX needs an action mask for every member or for none; "
                             f"{len(mask_rows)} of {self.n_agents} members have one")
        if state_rows and len(state_rows) != self.n_agents:
            raise ValueError("QMIX needs a 'state' entry in every member's observation or in none; "
                             f"{len(state_rows)} of {self.n_agents} members have one")
        self.obs_dim = len(obs_rows[0])
        self.obs_index = torch.as_tensor(np.stack(obs_rows), dtype=torch.long)
        self.mask_index: Optional[torch.Tensor] = (torch.as_tensor(np.stack(mask_rows), dtype=torch.long)
                                                   if mask_rows else None)
        # The mixer's input: the env's global state, else every member's observation.
        self.state_index = torch.as_tensor(np.concatenate(state_rows or obs_rows), dtype=torch.long)
        self.state_dim = len(self.state_index)
        self.has_env_state = bool(state_rows)

    def agent_obs(self, flat: torch.Tensor) -> torch.Tensor:
        """`[..., n_agents, obs_dim]` of flattened observations `[..., D]`."""
        return flat[..., self.obs_index]

    def state(self, flat: torch.Tensor) -> torch.Tensor:
        """`[..., state_dim]`: what the mixer is conditioned on."""
        return flat[..., self.state_index]

    def masked(self, q: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
        """`q` `[..., n_agents, A]` with illegal actions at the lowest float (never the argmax,
        never drawn by epsilon-greedy); a member whose mask allows nothing (padding, the last
        observation of a finished episode) stays unmasked."""
        if self.mask_index is None:
            return q
        allowed = flat[..., self.mask_index] > 0.5
        allowed = allowed | ~allowed.any(-1, keepdim=True)
        return q.masked_fill(~allowed, FLOAT_MIN)


__all__ = ["FLOAT_MIN", "GroupLayout"]
