"""Seeds and settings side by side (`rlfleet compare`): runs grouped by a config key, each
group's mean curve with a band over its runs, one colour a group, as a PNG and a
self-contained HTML page (the PNG inlined, a table of each group's numbers).

    rlfleet compare ~/rlfleet_results/sweep --group-by lr --metric episode_reward_mean --x timesteps

Groups: the runs' `params.json` values of the `--group-by` keys ("/" for nested keys;
"algorithm" for the algorithm); without them, runs whose configs differ only in `seed` form a
group, labelled by the keys that differ between groups. Each run's curve (read as
`rlfleet plot` reads it) is interpolated onto the x values its group shares (from the latest
first point to the earliest last one), then averaged; the band is the standard error of the
mean over the group's runs (`sem`, the default) or their range (`minmax`).
"""
from __future__ import annotations

import base64
import html
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlfleet.results.plot import PLOT_INSTALL_HINT, curve, find_runs, read_results, smooth
from rlfleet.results.result_values import flatten_dict
from rlfleet.results.run_summary import algorithm_of, read_params

X_AXES = {"timesteps": "timesteps_total", "time": "time_total_s", "iterations": "training_iteration"}
BANDS = ("sem", "minmax")
# Keys whose values differ from run to run without making another setting.
_PER_RUN_KEYS = frozenset({"seed"})


@dataclass(frozen=True)
class GroupCurve:
    """One group's curve: its mean and band at each shared x value."""

    label: str
    runs: Tuple[str, ...]
    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def _settings(run: str) -> Dict[str, str]:
    # A value naming the run's own folder (e.g. multiagent.policy_map_cache) differs in every
    # run without being a setting.
    own = os.path.basename(run)
    flat = {k: json.dumps(v, sort_keys=True) for k, v in flatten_dict(read_params(run)).items()
            if not (isinstance(v, str) and own in v)}
    flat["algorithm"] = json.dumps(algorithm_of(run))
    return flat


def _shown(value: str) -> str:
    loaded = json.loads(value)
    return loaded if isinstance(loaded, str) else value


def group_runs(runs: Sequence[str], group_by: Sequence[str] = ()) -> Dict[str, List[str]]:
    """`{label: runs}` (see the module's docstring), groups in the order their first run comes.

    Raises:
        ValueError: a `group_by` key is in no run's config (naming the keys there are).
    """
    settings = {run: _settings(run) for run in runs}
    if group_by:
        for key in group_by:
            if not any(key in s for s in settings.values()):
                known = sorted({k for s in settings.values() for k in s})
                raise ValueError(f"--group-by {key!r}: no run's params.json has it; keys: {', '.join(known)}")
        keys = list(group_by)
    else:
        all_keys = sorted({k for s in settings.values() for k in s} - _PER_RUN_KEYS)
        keys = [k for k in all_keys if len({s.get(k) for s in settings.values()}) > 1]
    groups: Dict[str, List[str]] = {}
    for run in runs:
        s = settings[run]
        label = ", ".join(f"{k}={_shown(s[k]) if k in s else '(unset)'}" for k in keys) or "all runs"
        groups.setdefault(label, []).append(run)
    return groups


def group_curve(label: str, runs: Sequence[str], metric: str, x: str, band: str = "sem",
                smoothing: int = 1) -> Optional[GroupCurve]:
    """The mean and band of `metric` against `x` over `runs`; None when no run has both."""
    points = []
    for run in runs:
        xs, ys = curve(read_results(run), metric, x)
        ys = smooth(ys, smoothing)
        pairs = [(a, b) for a, b in zip(xs, ys) if not math.isnan(b)]
        if pairs:
            points.append((run, np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])))
    if not points:
        return None
    start, end = max(p[1][0] for p in points), min(p[1][-1] for p in points)
    if start > end:  # runs that share no stretch of x: each is cut to where the shortest ends
        start = end = min(p[1][-1] for p in points)
    grid = np.unique(np.concatenate([p[1] for p in points]))
    grid = grid[(grid >= start) & (grid <= end)]
    ys = np.stack([np.interp(grid, px, py) for _, px, py in points])
    mean = ys.mean(axis=0)
    if band == "minmax":
        low, high = ys.min(axis=0), ys.max(axis=0)
    else:
        half = ys.std(axis=0, ddof=1) / math.sqrt(len(ys)) if len(ys) > 1 else np.zeros_like(mean)
        low, high = mean - half, mean + half
    return GroupCurve(label, tuple(p[0] for p in points), grid, mean, low, high)


def _draw(curves: Sequence[GroupCurve], out: str, metric: str, x: str, band: str, title: Optional[str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # headless: no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"`rlfleet compare` needs matplotlib ({exc}); install it with: {PLOT_INSTALL_HINT}") from exc
    colours = plt.get_cmap("tab10" if len(curves) <= 10 else "tab20").colors
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    try:
        for i, c in enumerate(curves):
            colour = colours[i % len(colours)]
            ax.plot(c.x, c.mean, color=colour, linewidth=1.8, label=f"{c.label[:60]} ({len(c.runs)} runs)")
            ax.fill_between(c.x, c.low, c.high, color=colour, alpha=0.2, linewidth=0)
        ax.set_xlabel(x)
        ax.set_ylabel(metric)
        ax.set_title(title or f"{metric}: mean, band = {'standard error' if band == 'sem' else 'min to max'} over runs")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
        fig.tight_layout()
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)


def _html(curves: Sequence[GroupCurve], png: str, metric: str, x: str, band: str) -> str:
    with open(png, "rb") as f:
        image = base64.b64encode(f.read()).decode("ascii")
    band_name = "standard error of the mean" if band == "sem" else "min to max"
    rows = "".join(
        f"<tr><td>{html.escape(c.label)}</td><td>{len(c.runs)}</td><td>{c.x[-1]:.6g}</td>"
        f"<td>{c.mean[-1]:.4g} [{c.low[-1]:.4g}, {c.high[-1]:.4g}]</td><td>{c.mean.max():.4g}</td>"
        f"<td>{'<br>'.join(html.escape(os.path.basename(r)) for r in c.runs)}</td></tr>" for c in curves)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>rlfleet compare: {html.escape(metric)}</title><style>body{{font-family:sans-serif;margin:2em}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;"
        "vertical-align:top}</style></head><body>"
        f"<h1>{html.escape(metric)} against {html.escape(x)}</h1>"
        f"<p>Each line is a group's mean over its runs; the band is the {band_name}.</p>"
        f"<img alt=\"{html.escape(metric)} curves\" src=\"data:image/png;base64,{image}\">"
        f"<table><tr><th>group</th><th>runs</th><th>last {html.escape(x)}</th><th>last mean [band]</th>"
        f"<th>best mean</th><th>run folders</th></tr>{rows}</table></body></html>\n")


def compare_runs(paths: Sequence[str], out: str, *, metric: str = "episode_reward_mean", x: str = "timesteps",
                 group_by: Sequence[str] = (), band: str = "sem", smoothing: int = 1,
                 title: Optional[str] = None) -> Tuple[str, str]:
    """Draws each group's mean curve and band into the PNG `out` and an HTML page beside it.

    Args:
        paths: run folders or folders of runs.
        out: the PNG to write; the page is the same path ending in ".html".
        metric: a result key, nested with "/".
        x: "timesteps", "time" or "iterations" (or a result key).
        group_by: config keys whose values make the groups (empty: see the module's docstring).
        band: "sem" (standard error over the group's runs) or "minmax".
        smoothing: moving-average window in points, per run before averaging (1: none).
        title: the plot's title.

    Returns:
        `(png path, html path)`.

    Raises:
        ValueError: an unknown band, no run found, a `group_by` key no run has, or no run
            with `metric` against `x`.
        ImportError: matplotlib is missing (names `pip install 'rlfleet[plot]'`).
    """
    if band not in BANDS:
        raise ValueError(f"--band {band!r}: give one of {', '.join(BANDS)}")
    if smoothing < 1:
        raise ValueError(f"smoothing must be >= 1, got {smoothing}")
    x_key = X_AXES.get(x, x)
    runs = find_runs(paths)
    curves = [c for c in (group_curve(label, members, metric, x_key, band, smoothing)
                          for label, members in group_runs(runs, group_by).items()) if c is not None]
    if not curves:
        first = read_results(runs[0])[:1]
        keys = sorted(k for r in first for k, v in flatten_dict(r).items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool))
        raise ValueError(f"no run has numbers for metric {metric!r} against x {x_key!r}; keys in the results: "
                         f"{', '.join(keys) or '(none)'}")
    png = os.path.abspath(os.path.expanduser(out))
    os.makedirs(os.path.dirname(png), exist_ok=True)
    _draw(curves, png, metric, x_key, band, title)
    page = os.path.splitext(png)[0] + ".html"
    with open(page, "w", encoding="utf-8") as f:
        f.write(_html(curves, png, metric, x_key, band))
    return png, page


__all__ = ["BANDS", "GroupCurve", "X_AXES", "compare_runs", "group_curve", "group_runs"]
