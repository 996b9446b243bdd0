"""Per-episode records: the object callbacks see, and the metrics row it leaves behind."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class RolloutMetrics:
    """One finished episode, as the metrics code aggregates it."""

    episode_length: int
    episode_reward: float
    custom_metrics: Dict[str, float] = field(default_factory=dict)
    hist_data: Dict[str, List[float]] = field(default_factory=dict)
    media: Dict[str, Any] = field(default_factory=dict)
    # Multi-agent episodes: {(agent_id, policy_id): summed reward}.
    agent_rewards: Dict[Any, float] = field(default_factory=dict)


class Episode:
    """The running episode of one sub-env, handed to the episode callbacks.

    Attributes:
        episode_id: unique id (also the `eps_id` column of its samples).
        env_index: which sub-env of the worker runs it.
        length: steps so far.
        total_reward: sum of (unclipped) rewards so far.
        custom_metrics: name -> float, reported as `<name>_mean/_min/_max`.
        user_data: free space for callbacks.
        hist_data: name -> list of floats, reported under `hist_stats`.
        media: name -> anything, passed through to the result.
    """

    __slots__ = (
        "episode_id", "env_index", "length", "total_reward", "custom_metrics", "user_data",
        "hist_data", "media", "_last_obs", "_last_raw_obs", "_last_action", "_last_info", "_last_reward",
    )

    def __init__(self, episode_id: int, env_index: int):
        self.episode_id = episode_id
        self.env_index = env_index
        self.length = 0
        self.total_reward = 0.0
        self.custom_metrics: Dict[str, float] = {}
        self.user_data: Dict[str, Any] = {}
        self.hist_data: Dict[str, List[float]] = {}
        self.media: Dict[str, Any] = {}
        self._last_obs = None
        self._last_raw_obs = None
        self._last_action = None
        self._last_info: Optional[dict] = None
        self._last_reward = 0.0

    # RLlib 1.x's accessors, which its callbacks use (single agent: agent id is ignored).
    def last_observation_for(self, agent_id=0):
        return self._last_obs

    def last_raw_obs_for(self, agent_id=0):
        return self._last_raw_obs

    def last_action_for(self, agent_id=0):
        return self._last_action

    def last_info_for(self, agent_id=0):
        return self._last_info

    def last_reward_for(self, agent_id=0):
        return self._last_reward

    def to_metrics(self) -> RolloutMetrics:
        return RolloutMetrics(
            int(self.length), float(self.total_reward), dict(self.custom_metrics),
            {k: list(v) for k, v in self.hist_data.items()}, dict(self.media),
        )
