"""The env as the search sees it: a position that can be saved, restored and stepped.

Tree search needs to try a move and come back, so the env must offer `get_state()` (any
value describing the position) and `set_state(state)` (back to it), as RLlib 1.x's AlphaZero
required too. Two kinds of env are searched:

| env | who moves | the mover's gain on a move |
| --- | --- | --- |
| single-agent Gymnasium env | one player | the env's reward |
| turn-based two-player `MultiAgentEnv` (one observation per step) | the agent observed | half its reward less half the other's (+1 for a win) |

A step that ends the episode (terminated or truncated, or `"__all__"`) is a leaf of the tree.
Legal moves come from the observation's `"action_mask"` (a Dict observation, as rlfleet's
masked models read it); without one every action is legal.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, NamedTuple, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv

MASK_KEY = "action_mask"


class Transition(NamedTuple):
    """One move tried from a saved position."""

    state: Any  # the env's `get_state()` after the move
    obs: Any  # the next mover's raw observation (None when the episode ended)
    gain: float  # what the move gained its mover
    rewards: Dict[Hashable, float]  # every player's reward on the move
    done: bool
    mover: Hashable  # who moves next (None when the episode ended)


def _hook(env: Any, name: str) -> Any:
    # A Gymnasium wrapper (gym.make's TimeLimit, OrderEnforcing) no longer forwards attributes;
    # `get_wrapper_attr` looks through it.
    if isinstance(env, gym.Wrapper):
        try:
            return env.get_wrapper_attr(name)
        except AttributeError:
            return None
    return getattr(env, name, None)


def check_search_hooks(env: Any) -> None:
    """Raises a clear error unless `env` can be saved and restored for the search."""
    missing = [name for name in ("get_state", "set_state") if not callable(_hook(env, name))]
    if missing:
        raise ValueError(
            f"AlphaZero searches by saving and restoring the env, but {type(env).__name__} has no "
            f"{' and no '.join(name + '()' for name in missing)}: give the env `get_state()` (returning its "
            "whole position, e.g. a tuple or bytes) and `set_state(state)` (restoring it)")


def legal_mask(obs: Any, num_actions: int) -> np.ndarray:
    """The legal actions of a raw observation (its `action_mask`; all legal without one)."""
    if isinstance(obs, dict) and MASK_KEY in obs:
        mask = np.asarray(obs[MASK_KEY]).reshape(-1) > 0.5
        if mask.size != num_actions:
            raise ValueError(f"AlphaZero: the observation's {MASK_KEY!r} has {mask.size} entries, but the action "
                             f"space has {num_actions} actions")
        return mask
    return np.ones(num_actions, bool)


class SearchGame:
    """One env seen as a game for the search (see the module doc).

    Args:
        env: a single-agent Gymnasium env or a turn-based two-player MultiAgentEnv, with
            `get_state` / `set_state`.
    """

    def __init__(self, env: Any):
        check_search_hooks(env)
        self.env = env
        self.two_player = isinstance(env, MultiAgentEnv)
        space = env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise ValueError(f"AlphaZero searches over Discrete actions (one branch per move); "
                             f"{type(env).__name__}'s action space is {space}: got {type(space).__name__}")
        self.num_actions = int(space.n)
        self._get, self._set = _hook(env, "get_state"), _hook(env, "set_state")

    def reset(self, seed: Optional[int]) -> Tuple[Any, Any, Hashable]:
        """Starts an episode; returns `(state, obs, mover)`."""
        obs, _ = self.env.reset(seed=seed)
        if self.two_player:
            mover, obs = self._single_mover(obs)
        else:
            mover = 0
        return self._get(), obs, mover

    def _single_mover(self, obs: Dict[Hashable, Any]) -> Tuple[Hashable, Any]:
        if len(obs) != 1:
            raise ValueError(f"AlphaZero's two-player mode needs a turn-based env (one observation per step, the "
                             f"player to move's); {type(self.env).__name__} observed {sorted(map(str, obs))} at once")
        (mover, single), = obs.items()
        return mover, single

    def step_from(self, state: Any, mover: Hashable, action: int) -> Transition:
        """Restores `state`, plays `action` for `mover`; what follows."""
        self._set(state)
        return self.play(mover, action)

    def play(self, mover: Hashable, action: int) -> Transition:
        """Plays `action` for `mover` from the env's current position."""
        if not self.two_player:
            obs, reward, terminated, truncated, _ = self.env.step(action)
            done = bool(terminated or truncated)
            return Transition(self._get(), None if done else obs, float(reward), {0: float(reward)}, done,
                              None if done else 0)
        obs, rewards, terminated, truncated, _ = self.env.step({mover: action})
        done = bool(terminated.get(ALL) or truncated.get(ALL))
        rewards = {a: float(r) for a, r in rewards.items()}
        others = [r for a, r in rewards.items() if a != mover]
        gain = 0.5 * (rewards.get(mover, 0.0) - (sum(others) / len(others) if others else 0.0))
        next_mover, next_obs = (None, None) if done else self._single_mover(obs)
        return Transition(self._get(), next_obs, gain, rewards, done, next_mover)


def players(game: SearchGame) -> List[Hashable]:
    """The seats of a game (`[0]` for a single-agent env)."""
    if not game.two_player:
        return [0]
    return list(game.env.possible_agents or [])


__all__ = ["SearchGame", "Transition", "check_search_hooks", "legal_mask", "players", "MASK_KEY"]
