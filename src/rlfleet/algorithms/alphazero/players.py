"""The search as a player, outside training: matches against fixed opponents and greedy
single-player episodes.

A search player needs the position, not just the observation, so players here are called as
`player(game, state, obs, mover, ret) -> action` on a `SearchGame` (`ret`: the episode's return
so far, which ranked rewards rank); an opponent that reads only the
observation (a random or scripted player, `fn(obs) -> action`) is wrapped by `observation_player`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Optional

import numpy as np

from rlfleet.algorithms.alphazero.alphazero_policy import network_evaluator
from rlfleet.algorithms.alphazero.game import SearchGame, legal_mask
from rlfleet.algorithms.alphazero.mcts import SearchSettings, choose_action, search

GamePlayer = Callable[[SearchGame, Any, Any, Hashable], int]


def search_player(policy: Any, preprocess: Callable[[Any], np.ndarray], settings: SearchSettings,
                  seed: Optional[int] = 0, *, bounded: bool = True,
                  ranked_threshold: Optional[float] = None) -> GamePlayer:
    """The tree search with `policy`'s network (e.g. `trainer.get_policy()` and its worker's
    `preprocessors[pid].transform`; `AlphaZeroTrainer.search_player()` fills these in). For
    play, pass settings with `argmax_tree_policy=True` and `add_dirichlet_noise=False`.

    Args:
        bounded, ranked_threshold: as for `mcts.search` (a network trained with ranked
            rewards values positions by rank: search it with the trainer's threshold). A
            single-player episode's return so far counts from the position the player is
            first asked about.
    """
    evaluate = network_evaluator(policy, preprocess)
    rng = np.random.default_rng(seed)

    def act(game: SearchGame, state: Any, obs: Any, mover: Hashable, ret: float = 0.0) -> int:
        tree, = search([game], [(state, obs, mover, ret)], evaluate, settings, rng, bounded=bounded,
                       ranked_threshold=ranked_threshold)
        return choose_action(tree, settings, rng)
    return act


def observation_player(fn: Callable[[Any], Any]) -> GamePlayer:
    """A player that reads only the observation (`fn(obs) -> action`)."""
    return lambda game, state, obs, mover, ret=0.0: int(fn(obs))


def random_player(seed: int = 0) -> GamePlayer:
    """Uniformly random among the legal moves."""
    rng = np.random.default_rng(seed)
    return lambda game, state, obs, mover, ret=0.0: int(rng.choice(np.flatnonzero(legal_mask(obs, game.num_actions))))


def play_match(game: SearchGame, player: GamePlayer, opponent: GamePlayer, games: int,
               seed: int = 0) -> Dict[str, int]:
    """`games` games of a two-player `game`, seats alternating (`player` moves first in even
    games, for envs whose `possible_agents` lists the first mover first). Returns `{"win",
    "loss", "draw", "illegal"}` from `player`'s side."""
    counts = {"win": 0, "loss": 0, "draw": 0, "illegal": 0}
    for index in range(games):
        state, obs, mover = game.reset(seed + index)
        mine = list(game.env.possible_agents)[index % 2]
        totals: Dict[Hashable, float] = {}
        done = False
        while not done:
            acting = player if mover == mine else opponent
            action = acting(game, state, obs, mover)
            if mover == mine and not legal_mask(obs, game.num_actions)[action]:
                counts["illegal"] += 1
            step = game.step_from(state, mover, action)
            for agent, r in step.rewards.items():
                totals[agent] = totals.get(agent, 0.0) + r
            state, obs, mover, done = step.state, step.obs, step.mover, step.done
        mine_r = totals.get(mine, 0.0)
        theirs = sum(r for a, r in totals.items() if a != mine)
        counts["win" if mine_r > theirs else "loss" if mine_r < theirs else "draw"] += 1
    return counts


def play_episode(game: SearchGame, player: GamePlayer, seed: int = 0) -> float:
    """One single-player episode with `player`; its return."""
    state, obs, mover = game.reset(seed)
    total, done = 0.0, False
    while not done:
        step = game.step_from(state, mover, player(game, state, obs, mover, total))
        total += sum(step.rewards.values())
        state, obs, mover, done = step.state, step.obs, step.mover, step.done
    return total


__all__ = ["search_player", "observation_player", "random_player", "play_match", "play_episode", "GamePlayer"]
