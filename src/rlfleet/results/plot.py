"""Learning curves of finished or running runs (`rlfleet plot`), drawn headless with
matplotlib's Agg backend (`pip install 'rlfleet[plot]'`).

    rlfleet plot ~/rlfleet_results/PPO_CartPole-v1_... [MORE_RUNS ...] --metric episode_reward_mean \\
        --x timesteps_total --smooth 5 --out curve.png

A run is a folder with a `result.json` (what `rlfleet train`, a `Trainer` and each Tune
trial write); a folder without one stands for every run below it (a Tune experiment, or a
whole results folder). Each run is one line labelled by its folder name; for a `*_mean`
metric with `*_min` / `*_max` beside it (e.g. `episode_reward_mean`) a band shows the range.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rlfleet.utils.nested import get_nested

PLOT_INSTALL_HINT = "pip install 'rlfleet[plot]'"


def find_runs(paths: Sequence[str]) -> List[str]:
    """The run folders (holding a `result.json`) at or below each of `paths`, in order.

    Raises:
        ValueError: naming a path that does not exist or holds no run.
    """
    runs: List[str] = []
    for path in paths:
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(path):
            raise ValueError(f"{path!r} is not a folder; give a run folder (with a result.json) or a folder of runs")
        if os.path.isfile(os.path.join(path, "result.json")):
            found = [path]
        else:
            found = sorted(root for root, _, files in os.walk(path) if "result.json" in files)
        if not found:
            raise ValueError(f"{path!r} holds no run: no result.json in it or below it")
        runs += [r for r in found if r not in runs]
    return runs


def _lookup(result: Dict[str, Any], key: str) -> Optional[float]:
    node = get_nested(result, key, sep="/", default=None)
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        return None
    return float(node)


def read_results(run: str) -> List[Dict[str, Any]]:
    """Every result of a run, from its `result.json` (a line cut short by a crash is skipped)."""
    results = []
    with open(os.path.join(run, "result.json"), encoding="utf-8") as f:
        for line in f:
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return results


def smooth(values: Sequence[float], window: int) -> List[float]:
    """Trailing moving average over `window` points, skipping NaNs (NaN where all are)."""
    out = []
    for i in range(len(values)):
        chunk = [v for v in values[max(0, i - window + 1):i + 1] if not math.isnan(v)]
        out.append(sum(chunk) / len(chunk) if chunk else math.nan)
    return out


def curve(results: Sequence[Dict[str, Any]], metric: str, x: str) -> Tuple[List[float], List[float]]:
    """The `(x, y)` points of `metric` against `x` (NaN where the metric is missing)."""
    xs, ys = [], []
    for result in results:
        xv = _lookup(result, x)
        if xv is None:
            continue
        yv = _lookup(result, metric)
        xs.append(xv)
        ys.append(math.nan if yv is None else yv)
    return xs, ys


def plot_runs(paths: Sequence[str], out: str, *, metric: str = "episode_reward_mean", x: str = "timesteps_total",
              smoothing: int = 1, title: Optional[str] = None) -> str:
    """Draws `metric` against `x` for every run at or below `paths` into the PNG `out`.

    Args:
        paths: run folders or folders of runs.
        out: the image file to write (its folder is created).
        metric: a result key, nested with "/" (e.g. "evaluation/episode_reward_mean").
        x: the x axis: "timesteps_total", "time_total_s", "training_iteration", ...
        smoothing: moving-average window in points (1: none).
        title: the plot's title (default: the metric).

    Returns:
        `out`.

    Raises:
        ValueError: no run found, or no run has `metric` against `x` (naming the keys it has).
        ImportError: matplotlib is missing (names `pip install 'rlfleet[plot]'`).
    """
    if smoothing < 1:
        raise ValueError(f"smoothing must be >= 1, got {smoothing}")
    try:
        import matplotlib

        matplotlib.use("Agg")  # headless: no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"`rlfleet plot` needs matplotlib ({exc}); install it with: {PLOT_INSTALL_HINT}") from exc

    runs = find_runs(paths)
    band_keys = (metric[:-5] + "_min", metric[:-5] + "_max") if metric.endswith("_mean") else None
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    drawn = 0
    available: set = set()
    try:
        for run in runs:
            results = read_results(run)
            xs, ys = curve(results, metric, x)
            if not any(not math.isnan(v) for v in ys):
                available.update(k for r in results[:1] for k, v in r.items()
                                 if isinstance(v, (int, float)) and not isinstance(v, bool))
                continue
            label = os.path.basename(run)
            line, = ax.plot(xs, smooth(ys, smoothing), label=label[:60], linewidth=1.5)
            if band_keys:
                _, lo = curve(results, band_keys[0], x)
                _, hi = curve(results, band_keys[1], x)
                if any(not math.isnan(v) for v in lo + hi):
                    ax.fill_between(xs, smooth(lo, smoothing), smooth(hi, smoothing), color=line.get_color(),
                                    alpha=0.15, linewidth=0)
            drawn += 1
        if not drawn:
            raise ValueError(f"no run has numbers for metric {metric!r} against x {x!r}; keys in the results: "
                             f"{', '.join(sorted(available)) or '(none)'}")
        ax.set_xlabel(x)
        ax.set_ylabel(metric)
        ax.set_title(title or metric)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
        fig.tight_layout()
        out = os.path.abspath(os.path.expanduser(out))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return out


__all__ = ["PLOT_INSTALL_HINT", "curve", "find_runs", "plot_runs", "read_results", "smooth"]
