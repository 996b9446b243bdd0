"""Ranked rewards (R2; Laterre et al. 2018, "Ranked Reward: Enabling Self-Play Reinforcement
Learning for Combinatorial Optimization", arXiv:1807.01672).

A single player has no opponent to beat, so it plays against its own recent past: the
returns of the last `buffer_max_length` episodes are kept, and an episode counts as a win
(+1) when its return beats their `percentile`-th percentile, a loss (-1) when it falls short,
a fair coin on a tie. The value network learns these outcomes, as a two-player game's value
net learns wins and losses; as the player improves, the bar rises.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from rlfleet.algorithms.alphazero.game import SearchGame, legal_mask


class RankedRewardBuffer:
    """The recent returns and the bar they set.

    Args:
        percentile: the percentile of the buffer an episode must beat (0-100).
        max_length: how many recent returns are kept.
    """

    def __init__(self, percentile: float, max_length: int):
        self.percentile = float(percentile)
        self.returns: deque = deque(maxlen=int(max_length))

    def add(self, returns: Iterable[float]) -> None:
        self.returns.extend(float(r) for r in returns)

    def threshold(self) -> Optional[float]:
        """The bar (None while the buffer is empty: then every episode ranks against itself)."""
        if not self.returns:
            return None
        return float(np.percentile(np.fromiter(self.returns, float), self.percentile))

    def get_state(self) -> Dict[str, Any]:
        return {"returns": np.fromiter(self.returns, np.float64)}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.returns.clear()
        self.returns.extend(float(r) for r in np.asarray(state["returns"]).reshape(-1))


def random_returns(game: SearchGame, episodes: int, rng: np.random.Generator) -> List[float]:
    """Returns of `episodes` episodes of a uniformly random legal-move player: the buffer's
    warm start (`ranked_rewards.initialize_buffer`)."""
    out = []
    for _ in range(episodes):
        _, obs, mover = game.reset(int(rng.integers(2**31)))
        total, done = 0.0, False
        while not done:
            step = game.play(mover, int(rng.choice(np.flatnonzero(legal_mask(obs, game.num_actions)))))
            total += sum(step.rewards.values())
            obs, mover, done = step.obs, step.mover, step.done
        out.append(total)
    return out


__all__ = ["RankedRewardBuffer", "random_returns"]
