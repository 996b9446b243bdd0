"""The unperturbed evaluation episodes of ES and ARS's last `report_length` iterations: the
one window that `episode_reward_mean`, `episode_reward_min`, `episode_reward_max`,
`episode_len_mean` and `hist_stats` are all computed over, so that the mean always lies
within [min, max] (a mean over some iterations beside a min and max over another would not).
"""
from __future__ import annotations

import math
from collections import deque
from typing import Any, Deque, Dict, Tuple

import numpy as np


class EvalWindow:
    """Per iteration, the returns and lengths of its evaluation episodes; the last
    `iterations` iterations kept (an iteration without one adds an empty entry, so the
    window is always the last `iterations` iterations, never older ones).

    Args:
        iterations: how many last iterations the window spans (`report_length`).
    """

    def __init__(self, iterations: int):
        self._entries: Deque[Tuple[np.ndarray, np.ndarray]] = deque(maxlen=int(iterations))

    def add(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Adds one iteration's evaluation episodes (possibly none)."""
        self._entries.append((np.asarray(returns, np.float64).ravel(), np.asarray(lengths, np.float64).ravel()))

    def _all(self) -> Tuple[np.ndarray, np.ndarray]:
        if not self._entries:
            return np.zeros(0), np.zeros(0)
        return (np.concatenate([r for r, _ in self._entries]), np.concatenate([n for _, n in self._entries]))

    def metrics(self) -> Dict[str, Any]:
        """`episode_reward_mean/min/max`, `episode_len_mean` (NaN while the window holds no
        episode) and `hist_stats`, all over the window's episodes."""
        returns, lengths = self._all()
        if not returns.size:
            stat = {name: math.nan for name in ("episode_reward_mean", "episode_reward_min", "episode_reward_max",
                                                "episode_len_mean")}
        else:
            stat = {"episode_reward_mean": float(returns.mean()), "episode_reward_min": float(returns.min()),
                    "episode_reward_max": float(returns.max()), "episode_len_mean": float(lengths.mean())}
        stat["hist_stats"] = {"episode_reward": returns.tolist(),
                              "episode_lengths": [int(n) if math.isfinite(n) else n for n in lengths.tolist()]}
        return stat

    # --- checkpoints ----------------------------------------------------------------------
    def get_state(self) -> Dict[str, np.ndarray]:
        returns, lengths = self._all()
        return {"eval_counts": np.array([r.size for r, _ in self._entries], np.int64),
                "eval_returns": returns, "eval_lengths": lengths}

    def set_state(self, state: Dict[str, Any]) -> None:
        """Restores `get_state()` output; a checkpoint written before the window existed holds
        only `eval_means` (one mean per iteration with an evaluation): each is restored as one
        episode of unknown (NaN) length."""
        self._entries.clear()
        if "eval_counts" not in state:
            means = np.asarray(state.get("eval_means", []), np.float64).ravel()
            for mean in means:
                self.add(np.array([mean]), np.array([math.nan]))
            return
        returns = np.asarray(state["eval_returns"], np.float64).ravel()
        lengths = np.asarray(state["eval_lengths"], np.float64).ravel()
        start = 0
        for count in np.asarray(state["eval_counts"], np.int64).ravel():
            self.add(returns[start:start + count], lengths[start:start + count])
            start += int(count)


__all__ = ["EvalWindow"]
