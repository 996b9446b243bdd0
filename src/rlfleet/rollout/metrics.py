"""Turns finished-episode records into the result dict's episode statistics."""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Dict, Iterable, List, Sequence

import numpy as np

from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.rollout.episode import RolloutMetrics


def summarize_episodes(episodes: Sequence[RolloutMetrics], new_episodes: int | None = None) -> Dict:
    """Statistics over `episodes` (the smoothing window).

    Args:
        episodes: finished episodes to aggregate.
        new_episodes: how many of them finished this iteration (default: all).

    Returns:
        `episode_reward_mean/min/max`, `episode_len_mean`, `episodes_this_iter`,
        `custom_metrics` (`<name>_mean/_min/_max`), `hist_stats`, `episode_media`.
        Means are NaN when there is no episode yet.
    """
    rewards = np.array([e.episode_reward for e in episodes], dtype=np.float64)
    lengths = np.array([e.episode_length for e in episodes], dtype=np.float64)
    custom: Dict[str, List[float]] = defaultdict(list)
    hist: Dict[str, List[float]] = {"episode_reward": rewards.tolist(), "episode_lengths": lengths.astype(int).tolist()}
    media: Dict[str, list] = defaultdict(list)
    policy_rewards: Dict[str, List[float]] = defaultdict(list)
    for e in episodes:
        for (_, policy_id), reward in e.agent_rewards.items():
            # As the reference: the default policy (single-agent runs) is not listed.
            if policy_id != DEFAULT_POLICY_ID:
                policy_rewards[policy_id].append(reward)
        for name, value in e.custom_metrics.items():
            custom[name].append(value)
        for name, values in e.hist_data.items():
            hist.setdefault(name, []).extend(values)
        for name, value in e.media.items():
            media[name].append(value)
    custom_stats = {}
    for name, values in custom.items():
        arr = np.asarray(values, dtype=np.float64)
        finite = arr[np.isfinite(arr)]
        custom_stats[f"{name}_mean"] = float(np.mean(finite)) if len(finite) else float("nan")
        custom_stats[f"{name}_min"] = float(np.min(finite)) if len(finite) else float("nan")
        custom_stats[f"{name}_max"] = float(np.max(finite)) if len(finite) else float("nan")
    for policy_id, values in policy_rewards.items():
        hist[f"policy_{policy_id}_reward"] = values
    has = len(rewards) > 0
    return {
        "episode_reward_max": float(rewards.max()) if has else float("nan"),
        "episode_reward_min": float(rewards.min()) if has else float("nan"),
        "episode_reward_mean": float(rewards.mean()) if has else float("nan"),
        "episode_len_mean": float(lengths.mean()) if has else float("nan"),
        "policy_reward_min": {pid: float(np.min(v)) for pid, v in policy_rewards.items()},
        "policy_reward_max": {pid: float(np.max(v)) for pid, v in policy_rewards.items()},
        "policy_reward_mean": {pid: float(np.mean(v)) for pid, v in policy_rewards.items()},
        "episodes_this_iter": len(episodes) if new_episodes is None else int(new_episodes),
        "custom_metrics": custom_stats,
        "hist_stats": hist,
        "episode_media": dict(media),
    }


class EpisodeWindow:
    """The finished episodes a result's episode statistics are taken over.

    Args:
        size: `metrics_smoothing_episodes`: the window holds the last `size` episodes.

    Attributes:
        total: episodes added since the start (or `reset(total)`).
    """

    def __init__(self, size: int):
        self._episodes: deque = deque(maxlen=int(size))
        self.total = 0

    def add(self, new_episodes: Sequence[RolloutMetrics]) -> Dict:
        """Adds this iteration's finished episodes; returns `summarize_episodes` of the window."""
        self.total += len(new_episodes)
        self._episodes.extend(new_episodes)
        return summarize_episodes(list(self._episodes), new_episodes=len(new_episodes))

    def reset(self, total: int = 0) -> None:
        self._episodes.clear()
        self.total = int(total)


def summarize_perf(perf: Dict[str, float]) -> Dict[str, float]:
    """A sampler's accumulated timings (seconds, and `steps`) as mean milliseconds per step."""
    steps = max(1, perf["steps"])
    return {f"mean_{key}_ms": 1000.0 * perf[key] / steps for key in ("env_wait", "inference", "processing")}


def merge_perf(perfs: Iterable[Dict[str, float]]) -> Dict[str, float]:
    """Averages the workers' sampler timing stats key by key."""
    acc: Dict[str, List[float]] = defaultdict(list)
    for perf in perfs:
        for k, v in perf.items():
            acc[k].append(v)
    return {k: float(np.mean(v)) for k, v in acc.items()}
