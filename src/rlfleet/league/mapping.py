"""The league's policy mapping: per episode, one seat to main and the other to an opponent
drawn from the PFSP probabilities (`League.probabilities`).

The draw depends only on the seed and the episode id (workers give consecutive ids), so it
needs no shared state between workers: main takes the first seat in even-numbered episodes
and the second in odd ones. The choice is written to `episode.user_data["league"]` as
`{"main_agent", "opponent"}`, where `LeagueCallbacks.on_episode_end` reads it back.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

USER_DATA_KEY = "league"


class LeagueMapping:
    """`policy_mapping_fn(agent_id, episode, worker=None, **kwargs)` for a two-seat league.

    Args:
        main: main's policy id.
        seats: the two agent ids.
        probabilities: `{opponent policy id: probability}` (main's own id for self-play).
        seed: an int mixed with each episode id to draw its opponent.
    """

    def __init__(self, *, main: str, seats: Tuple[str, str], probabilities: Dict[str, float], seed: int):
        self.main = main
        self.seats = tuple(seats)
        self.opponents = list(probabilities)
        p = np.array([probabilities[o] for o in self.opponents], dtype=np.float64)
        self.cdf = np.cumsum(p / p.sum())
        self.seed = int(seed)

    def match(self, episode_id: int) -> Tuple[str, str]:
        """`(main's agent id, opponent policy id)` of episode `episode_id`."""
        u = np.random.default_rng([self.seed, int(episode_id) % (1 << 63)]).random()
        opponent = self.opponents[min(int(np.searchsorted(self.cdf, u, side="right")), len(self.opponents) - 1)]
        return self.seats[int(episode_id) % 2], opponent

    def __call__(self, agent_id: Any, episode: Optional[Any] = None, worker: Optional[Any] = None,
                 **kwargs: Any) -> str:
        if agent_id not in self.seats:
            raise ValueError(f"League policy mapping: agent {agent_id!r} is none of the league's seats "
                             f"{self.seats}; set LeagueSettings(seats=...) to the env's two agent ids")
        if episode is None:  # asked outside an episode (e.g. to infer spaces): main's seat
            return self.main
        main_agent, opponent = self.match(episode.episode_id)
        episode.user_data[USER_DATA_KEY] = {"main_agent": main_agent, "opponent": opponent}
        return self.main if agent_id == main_agent else opponent
