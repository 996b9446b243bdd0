"""One line per run (`rlfleet runs`): algorithm, env, status, best and last return, steps,
time and newest checkpoint, read from the run folder alone (no code of the run is loaded).

    rlfleet runs ~/rlfleet_results
    run                                  algorithm  env          status    best   last  steps  time  checkpoint
    PPO_CartPole-v1_2026-12-04_..._93a0  PPO        CartPole-v1  finished  22.98  22.98  1200  0.1s  checkpoint_2

The algorithm comes from the folder's name (`<Algo>_<env>_<date>_<id>` as `rlfleet train`
names it, `rlfleet.<Algo>_...` for a Tune trial), the env from `params.json`, the status from
`run_status.json` (`rlfleet.results.run_status`), the numbers from `result.json`.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from rlfleet.results.plot import find_runs, read_results
from rlfleet.results.run_status import read_status
from rlfleet.results.trackers import run_checkpoints
from rlfleet.utils.nested import get_nested

# The episode return under its 1.x name, then its 2.x one (results carry both).
RETURN_KEYS = ("episode_reward_mean", "env_runners/episode_return_mean")
_TUNE_PREFIX = "rlfleet."


@dataclass(frozen=True)
class RunSummary:
    """What `rlfleet runs` shows of one run (None: not known)."""

    path: str
    algorithm: Optional[str]
    env: Optional[str]
    status: str
    reason: Optional[str]
    best_return: Optional[float]
    last_return: Optional[float]
    steps: Optional[int]
    time_s: Optional[float]
    checkpoint: Optional[str]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def read_params(run_dir: str) -> Dict[str, Any]:
    """The run's config from its `params.json` (empty when missing or unreadable)."""
    try:
        with open(os.path.join(run_dir, "params.json"), encoding="utf-8") as f:
            params = json.load(f)
    except (OSError, ValueError):
        return {}
    return params if isinstance(params, dict) else {}


def algorithm_of(run_dir: str) -> Optional[str]:
    """The registered algorithm the run folder's name starts with (the longest that fits:
    "APEX_DDPG_Pendulum-v1_..." is APEX_DDPG), or None."""
    from rlfleet.registry import list_algorithms

    name = os.path.basename(os.path.normpath(run_dir))
    name = name[len(_TUNE_PREFIX):] if name.startswith(_TUNE_PREFIX) else name
    fits = [algo for algo in list_algorithms() if name == algo or name.startswith(algo + "_")]
    return max(fits, key=len) if fits else None


def _number(result: Dict[str, Any], key: str) -> Optional[float]:
    value = get_nested(result, key, sep="/", default=None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def episode_returns(results: Sequence[Dict[str, Any]]) -> List[float]:
    """The finite mean episode returns of a run's results, in order."""
    out = []
    for result in results:
        value = next((v for v in (_number(result, k) for k in RETURN_KEYS) if v is not None), None)
        if value is not None:
            out.append(value)
    return out


def summarize_run(run_dir: str) -> RunSummary:
    """The summary of the run in `run_dir` (a folder with a `result.json`)."""
    results = read_results(run_dir)
    last = results[-1] if results else {}
    returns = episode_returns(results)
    env = read_params(run_dir).get("env")
    checkpoints = run_checkpoints(run_dir)
    steps = _number(last, "timesteps_total")
    status = read_status(run_dir, last)
    return RunSummary(
        path=run_dir, algorithm=algorithm_of(run_dir), env=env if isinstance(env, str) else None,
        status=status.status, reason=status.reason, best_return=max(returns) if returns else None,
        last_return=returns[-1] if returns else None, steps=None if steps is None else int(steps),
        time_s=_number(last, "time_total_s"),
        checkpoint=os.path.relpath(checkpoints[-1], run_dir) if checkpoints else None)


def list_runs(paths: Sequence[str]) -> List[RunSummary]:
    """Summaries of every run at or below `paths`, oldest folder first.

    Raises:
        ValueError: a path is not a folder or holds no run.
    """
    runs = find_runs(paths)
    runs.sort(key=lambda r: (os.path.getmtime(os.path.join(r, "result.json")), r))
    return [summarize_run(r) for r in runs]


def _cell(value: Any, fmt: str = "") -> str:
    if value is None:
        return "-"
    return format(value, fmt) if fmt else str(value)


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def format_runs(summaries: Sequence[RunSummary]) -> str:
    """The runs as a plain-text table, one line a run (a failed run's reason on a line below)."""
    header = ("run", "algorithm", "env", "status", "best", "last", "steps", "time", "checkpoint")
    rows = [(s.name, _cell(s.algorithm), _cell(s.env), s.status, _cell(s.best_return, ".2f"),
             _cell(s.last_return, ".2f"), _cell(s.steps), _duration(s.time_s), _cell(s.checkpoint))
            for s in summaries]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {4, 5, 6, 7}
    lines = []
    for row, summary in zip([header, *rows], [None, *summaries]):
        cells = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if summary is not None and summary.status == "failed" and summary.reason:
            lines.append(f"    ({summary.reason})")
    return "\n".join(lines) + "\n"


__all__ = ["RETURN_KEYS", "RunSummary", "algorithm_of", "episode_returns", "format_runs", "list_runs",
           "read_params", "summarize_run"]
