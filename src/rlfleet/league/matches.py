"""Head-to-head games in a two-player PettingZoo AEC env, outside training: how a league's
main policy fares against a fixed opponent (a snapshot, a random legal-move player).

A player is `fn(observation) -> action` for the raw PettingZoo observation of its turn.
Seats alternate: the first player moves first in even-numbered games. A move the
observation's `action_mask` forbids is counted as illegal (PettingZoo then ends the game
against the mover).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import numpy as np

Player = Callable[[Any], Any]


def random_legal_player(seed: int = 0) -> Player:
    """Uniformly random among the moves the observation's `action_mask` allows."""
    rng = np.random.default_rng(seed)

    def act(observation):
        return int(rng.choice(np.flatnonzero(observation["action_mask"])))
    return act


def policy_player(trainer, policy_id: str, *, explore: bool = False) -> Player:
    """The trainer's policy `policy_id` acting on raw observations (`compute_single_action`)."""
    def act(observation):
        return trainer.compute_single_action(observation, policy_id=policy_id, explore=explore)
    return act


def play_games(make_env: Callable[[], Any], player: Player, opponent: Player, games: int,
               seed: int = 0, lost: Optional[List[Dict[str, Any]]] = None) -> Dict[str, int]:
    """Plays `games` games of `player` against `opponent` in `make_env()` (an AECEnv).

    Args:
        lost: if a list, each game `player` lost is appended to it as `{"game", "seat",
            "moves"}` (its index, `player`'s agent id, every move in order), to replay.

    Returns:
        `{"win", "loss", "draw"}` counted from `player`'s side, and `"illegal"`: `player`'s
        moves the mask forbade.
    """
    env = make_env()
    counts = {"win": 0, "loss": 0, "draw": 0, "illegal": 0}
    for game in range(games):
        env.reset(seed=seed + game)
        seats = list(env.possible_agents)
        mine = seats[game % 2]
        returns = {a: 0.0 for a in seats}
        moves: List[Any] = []
        for agent in env.agent_iter():
            observation, reward, terminated, truncated, _ = env.last()
            returns[agent] += float(reward)  # what the agent got since its last turn
            if terminated or truncated:
                env.step(None)
                continue
            action = (player if agent == mine else opponent)(observation)
            if agent == mine and not observation["action_mask"][action]:
                counts["illegal"] += 1
            moves.append(int(action))
            env.step(action)
        mine_r = returns[mine]
        theirs_r = sum(r for a, r in returns.items() if a != mine)
        counts["win" if mine_r > theirs_r else "loss" if mine_r < theirs_r else "draw"] += 1
        if lost is not None and mine_r < theirs_r:
            lost.append({"game": game, "seat": mine, "moves": moves})
    env.close()
    return counts
