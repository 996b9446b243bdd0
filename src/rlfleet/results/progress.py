"""Progress of `rlfleet train`: a live table (rich) on a terminal, one plain line per
iteration otherwise (CI logs, pipes, `--quiet`), both with an ETA toward the stop criteria.

    iter    3 | steps    6000 | reward   41.20 (min 12.0, max 130.0) | len 41.2 | episodes 160 | 4.1s | ETA 52s (episode_reward_mean)

The ETA of a criterion `key >= threshold` extrapolates the key's rate over the last few
iterations (per second of training time); training stops at the first criterion met, so
the line shows the soonest. A key that does not move toward its threshold has no ETA.
"""
from __future__ import annotations

import math
import sys
from collections import deque
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple

from rlfleet.utils.nested import get_nested

# Iterations the rate of a stop key is measured over.
RATE_WINDOW = 5
# Rows of the live table.
LIVE_ROWS = 10
# Result keys the table always shows.
_COLUMNS = ("training_iteration", "timesteps_total", "episode_reward_mean", "episode_reward_min",
            "episode_reward_max", "episode_len_mean", "time_total_s")


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def format_duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


class StopEstimator:
    """Estimates the training time left until each stop criterion is met.

    Args:
        stop: result key (nested with "/") -> threshold; met when `value >= threshold`.
    """

    def __init__(self, stop: Mapping[str, float]):
        self.stop = dict(stop)
        self._history: Dict[str, Deque[Tuple[float, float]]] = {k: deque(maxlen=RATE_WINDOW + 1) for k in self.stop}

    def update(self, result: Mapping[str, Any]) -> Dict[str, Optional[float]]:
        """Adds one result; returns `{key: seconds left}` (0 when met, None when unknown)."""
        now = _number(result.get("time_total_s"))
        etas: Dict[str, Optional[float]] = {}
        for key, threshold in self.stop.items():
            value = _number(get_nested(result, key, sep="/", default=None))
            if value is None or now is None:
                etas[key] = None
                continue
            history = self._history[key]
            history.append((now, value))
            if value >= threshold:
                etas[key] = 0.0
                continue
            (t0, v0), (t1, v1) = history[0], history[-1]
            rate = (v1 - v0) / (t1 - t0) if t1 > t0 else 0.0
            etas[key] = (threshold - value) / rate if rate > 0 else None
        return etas

    @staticmethod
    def soonest(etas: Mapping[str, Optional[float]]) -> Optional[Tuple[str, float]]:
        """The criterion expected to be met first, with its seconds left (None: no estimate)."""
        known = [(eta, key) for key, eta in etas.items() if eta is not None]
        if not known:
            return None
        eta, key = min(known)
        return key, eta


class ProgressReporter:
    """Shows one training run's progress, iteration after iteration.

    Args:
        stop: the run's stop criteria (for the ETA and the keys shown).
        line_formatter: `(result, extra_keys) -> str`, the plain line (the CLI's
            `format_progress`).
        stream: where to write (default: stdout).
        live: a live rich table (True), plain lines (False), or None: live when `stream`
            is a terminal.
    """

    def __init__(self, stop: Mapping[str, float], line_formatter, *, stream: Optional[TextIO] = None,
                 live: Optional[bool] = None):
        self.stream = stream if stream is not None else sys.stdout
        self.extra_keys: List[str] = list(stop)
        self.format_line = line_formatter
        self.estimator = StopEstimator(stop)
        if live is None:
            live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.live = live
        self._table_keys = [k for k in self.extra_keys if k not in _COLUMNS]
        self._rows: Deque[Sequence[str]] = deque(maxlen=LIVE_ROWS)
        self._live: Any = None
        self._console: Any = None

    # --- plain -----------------------------------------------------------------------
    @staticmethod
    def eta_text(etas: Mapping[str, Optional[float]]) -> str:
        """`ETA 52s (episode_reward_mean)`; empty without an estimate or once one is met."""
        soonest = StopEstimator.soonest(etas)
        if soonest is None or soonest[1] == 0:  # met: the stop message follows
            return ""
        key, eta = soonest
        return f"ETA {format_duration(eta)} ({key})"

    def update(self, result: Mapping[str, Any]) -> None:
        """Shows one iteration's result."""
        etas = self.estimator.update(result)
        if not self.live:
            line = self.format_line(result, self.extra_keys)
            eta = self.eta_text(etas)
            print(f"{line} | {eta}" if eta else line, file=self.stream, flush=True)
            return
        self._update_live(result, etas)

    def print(self, text: str) -> None:
        """A message above the live table (or a plain line)."""
        if self._console is not None:
            self._console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    # --- live ------------------------------------------------------------------------
    def _update_live(self, result: Mapping[str, Any], etas: Mapping[str, Optional[float]]) -> None:
        from rich.console import Console
        from rich.live import Live

        def num(key: str, fmt: str) -> str:
            value = _number(get_nested(result, key, sep="/", default=None))
            return "n/a" if value is None else format(value, fmt)

        self._rows.append([num("training_iteration", ".0f"), num("timesteps_total", ".0f"),
                           num("episode_reward_mean", ".2f"), num("episode_reward_min", ".1f"),
                           num("episode_reward_max", ".1f"), num("episode_len_mean", ".1f"),
                           num("time_total_s", ".1f")]
                          + [num(k, ".4g") for k in self._table_keys])
        if self._live is None:
            self._console = Console(file=self.stream)
            self._live = Live(console=self._console, refresh_per_second=4, transient=False)
            self._live.start()
        self._live.update(self._table(etas), refresh=True)

    def _table(self, etas: Mapping[str, Optional[float]]):
        from rich.table import Table

        lines = []
        for key, threshold in self.estimator.stop.items():
            eta = etas.get(key)
            lines.append(f"{key} >= {threshold}: " + ("?" if eta is None else
                                                      "met" if eta == 0 else format_duration(eta)))
        table = Table(caption=("ETA  " + "  |  ".join(lines)) if lines else None, caption_justify="left")
        for name in ["iter", "steps", "reward", "min", "max", "len", "time (s)"] + self._table_keys:
            table.add_column(name, justify="right")
        for row in self._rows:
            table.add_row(*row)
        return table

    def close(self) -> None:
        """Leaves the last table on screen; later output goes below it."""
        if self._live is not None:
            self._live.stop()
            self._live = None
            self._console = None


__all__ = ["ProgressReporter", "StopEstimator", "format_duration"]
