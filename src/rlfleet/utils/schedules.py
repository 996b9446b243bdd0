"""Value schedules over timesteps (learning rates, entropy coefficients, epsilons)."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np


class Schedule:
    """A value as a function of the global timestep."""

    def value(self, t: int) -> float:
        raise NotImplementedError  # abstract

    def __call__(self, t: int) -> float:
        return self.value(t)


class ConstantSchedule(Schedule):
    def __init__(self, value: float):
        self._v = float(value)

    def value(self, t: int) -> float:
        return self._v


class PiecewiseSchedule(Schedule):
    """Linear interpolation between `(timestep, value)` endpoints.

    Args:
        endpoints: pairs sorted by timestep.
        outside_value: value past the last endpoint (default: the last endpoint's value).
    """

    def __init__(self, endpoints: Sequence[Tuple[int, float]], outside_value: Optional[float] = None):
        points = [(int(t), float(v)) for t, v in endpoints]
        if not points:
            raise ValueError("a piecewise schedule needs at least one (timestep, value) pair")
        if any(b[0] < a[0] for a, b in zip(points, points[1:])):
            raise ValueError(f"schedule endpoints must be sorted by timestep, got {points}")
        self._t = np.array([p[0] for p in points], dtype=np.float64)
        self._v = np.array([p[1] for p in points], dtype=np.float64)
        self._outside = points[-1][1] if outside_value is None else float(outside_value)

    def value(self, t: int) -> float:
        if t >= self._t[-1]:
            return self._outside
        return float(np.interp(t, self._t, self._v))


class LinearSchedule(PiecewiseSchedule):
    """From `initial_p` to `final_p` over `schedule_timesteps`, then constant."""

    def __init__(self, schedule_timesteps: int, final_p: float, initial_p: float = 1.0):
        super().__init__([(0, initial_p), (max(1, int(schedule_timesteps)), final_p)])


def make_schedule(base_value: float, schedule: Optional[Sequence], key: str = "schedule") -> Schedule:
    """A constant schedule at `base_value`, or the piecewise one `schedule` describes.

    Args:
        base_value: the value when `schedule` is None.
        schedule: None or a list of `[timestep, value]` pairs (the reference's format).
        key: the config key, for error messages.
    """
    if schedule is None:
        return ConstantSchedule(base_value)
    try:
        return PiecewiseSchedule(schedule)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`{key}` must be a list of [timestep, value] pairs, got {schedule!r}: {e}") from None
