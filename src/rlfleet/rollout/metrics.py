"""Turns finished-episode records into the result dict's episode statistics."""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Dict, Iterable, List, Sequence

import numpy as np

from rlfleet.offline.off_policy_estimate import OffPolicyEstimate
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.rollout.episode import RolloutMetrics


def summarize_estimates(estimates: Sequence[OffPolicyEstimate]) -> Dict[str, Dict[str, float]]:
    """`{estimator name: {metric: mean over the estimates}}`: the result's `off_policy_estimator`."""
    acc: Dict[str, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    for e in estimates:
        for k, v in e.metrics.items():
            acc[e.estimator_name][k].append(v)
    return {name: {k: float(np.mean(v)) for k, v in metrics.items()} for name, metrics in acc.items()}


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
            # As RLlib 1.x: the default policy (single-agent runs) is not listed, since it would
            # repeat episode_reward_*.
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

    As RLlib 1.x's `min_history` (`rllib/evaluation/metrics.py`): every episode that
    finished this iteration counts, however many; when fewer than `size` did, the most recent
    earlier ones fill the window up to `size`. So `size` (`metrics_smoothing_episodes`) is a minimum, not a cap.

    Args:
        size: `metrics_smoothing_episodes`.

    Attributes:
        total: episodes added since the start (or `reset(total)`).
    """

    def __init__(self, size: int):
        self.size = int(size)
        self._history: deque = deque(maxlen=self.size)  # the last `size` episodes, for padding
        self.total = 0

    def add(self, new_episodes: Sequence[RolloutMetrics]) -> Dict:
        """Adds this iteration's finished episodes; returns `summarize_episodes` over them
        and, when they are fewer than `size`, the latest earlier ones."""
        # Off-policy estimates (offline input) come with the episodes; they are this
        # iteration's only, summarised under `off_policy_estimator`.
        estimates = [e for e in new_episodes if isinstance(e, OffPolicyEstimate)]
        new_episodes = [e for e in new_episodes if not isinstance(e, OffPolicyEstimate)]
        missing = self.size - len(new_episodes)
        window = (list(self._history)[-missing:] if missing > 0 else []) + new_episodes
        self.total += len(new_episodes)
        self._history.extend(new_episodes)
        result = summarize_episodes(window, new_episodes=len(new_episodes))
        result["off_policy_estimator"] = summarize_estimates(estimates)
        return result

    def reset(self, total: int = 0) -> None:
        self._history.clear()
        self.total = int(total)

    def get_state(self) -> List[Dict]:
        """The window's episodes for a checkpoint: length, reward, custom metrics and per-agent
        rewards (histogram data and media are left out), so that a run resumed, or going on
        from its own checkpoint, reports the same smoothed returns as before it."""
        return [{"length": int(m.episode_length), "reward": float(m.episode_reward),
                 "custom_metrics": {str(k): float(v) for k, v in m.custom_metrics.items()},
                 "agent_rewards": [[agent, policy, float(r)] for (agent, policy), r in m.agent_rewards.items()]}
                for m in self._history]

    def set_state(self, episodes: Sequence[Dict], total: int) -> None:
        """Restores `get_state()` output and the episode count `total`."""
        self.reset(total)
        self._history.extend(
            RolloutMetrics(int(e["length"]), float(e["reward"]), dict(e.get("custom_metrics") or {}),
                           agent_rewards={(agent, policy): float(r) for agent, policy, r in e.get("agent_rewards") or []})
            for e in episodes)


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
