"""Results as the CLI reads them: stop criteria (any key reaching its threshold) and the
one-line progress summary."""
from __future__ import annotations

import difflib
import math
import sys
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from rlfleet.results.logger import EXCLUDED_FROM_CSV, flatten_dict
from rlfleet.utils.nested import MISSING, get_nested


def lookup_result(result: Mapping[str, Any], key: str) -> Any:
    """Returns ``result[key]``, following "/" into nested dicts ("evaluation/x").

    Args:
        result: a result dict.
        key: a top-level key or a "/"-separated path.

    Returns:
        The value, or ``rlfleet.utils.nested.MISSING`` when absent.
    """
    return get_nested(result, key, sep="/")


def stop_criteria_met(result: Mapping[str, Any],
                      stop: Mapping[str, float]) -> List[Tuple[str, Any, float]]:
    """Tune's dict semantics: training stops when ANY ``result[key] >= threshold``.

    A key missing from the result, a NaN value (e.g. ``episode_reward_mean`` before the first
    episode ends) or a non-numeric value never triggers.

    Args:
        result: the latest result dict.
        stop: result key (nested with "/") -> threshold.

    Returns:
        ``(key, value, threshold)`` for every criterion met; empty to keep training.
    """
    met = []
    for key, threshold in stop.items():
        value = lookup_result(result, key)
        if value is MISSING:
            continue
        try:
            if value >= threshold:
                met.append((key, value, threshold))
        except TypeError:
            continue
    return met


def warn_missing_stop_keys(result: Mapping[str, Any], stop: Mapping[str, float]) -> None:
    available = sorted(k for k, v in flatten_dict(result).items()
                       if not any(p in EXCLUDED_FROM_CSV for p in k.split("/"))
                       and isinstance(v, (int, float)) and not isinstance(v, bool))
    for key in stop:
        if lookup_result(result, key) is not MISSING:
            continue
        if key.split("/")[0] == "evaluation":
            # Evaluation results only exist on evaluation iterations (evaluation_interval).
            hint = " (Evaluation keys appear only on iterations that evaluate.)"
        else:
            close = difflib.get_close_matches(key, available, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
        print(f"WARNING: stop key {key!r} is not in the first result, so it only stops "
              f"training if it appears later.{hint} Available keys: {', '.join(available)}",
              file=sys.stderr)


def format_number(value: Any, fmt: str) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return format(value, fmt)


_SHOWN_KEYS = frozenset({"training_iteration", "timesteps_total", "episode_reward_mean",
                         "episode_reward_min", "episode_reward_max", "episode_len_mean",
                         "episodes_total", "time_total_s"})


def format_progress(result: Mapping[str, Any], extra_keys: Sequence[str] = ()) -> str:
    """One progress line, e.g. ``iter   12 | steps   48000 | reward  187.30 (min 21.0,
    max 500.0) | len 187.3 | episodes 312 | 35.2s``.

    Args:
        result: the iteration's result dict; missing or NaN values print as "n/a".
        extra_keys: further keys to show (the CLI passes the stop keys not shown anyway).

    Returns:
        The line, without a newline.
    """
    it = format_number(result.get("training_iteration"), ">4d") or " n/a"
    steps = format_number(result.get("timesteps_total"), ">7d") or "    n/a"
    reward = format_number(result.get("episode_reward_mean"), "7.2f")
    if reward is None:
        reward_part = "reward     n/a"
    else:
        reward_part = f"reward {reward}"
        rmin = format_number(result.get("episode_reward_min"), ".1f")
        rmax = format_number(result.get("episode_reward_max"), ".1f")
        if rmin is not None and rmax is not None:
            reward_part += f" (min {rmin}, max {rmax})"
    parts = [
        f"iter {it}",
        f"steps {steps}",
        reward_part,
        f"len {format_number(result.get('episode_len_mean'), '.1f') or 'n/a'}",
        f"episodes {format_number(result.get('episodes_total'), 'd') or 'n/a'}",
        f"{format_number(result.get('time_total_s'), '.1f') or 'n/a'}s",
    ]
    for key in extra_keys:
        if key in _SHOWN_KEYS:
            continue
        value = lookup_result(result, key)
        if value is MISSING:
            continue
        shown = format_number(value, ".4g") or str(value)
        parts.append(f"{key} {shown}")
    return " | ".join(parts)


def describe_stop(stop: Mapping[str, float]) -> str:
    if not stop:
        return "no stop criteria: training until Ctrl-C"
    return "stop when any of: " + ", ".join(f"{k} >= {v}" for k, v in stop.items())
