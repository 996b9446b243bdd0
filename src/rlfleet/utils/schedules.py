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


class ExponentialSchedule(Schedule):
    """`initial_p * decay_rate ** (t / schedule_timesteps)`: decays by `decay_rate` every
    `schedule_timesteps` steps, without end."""

    def __init__(self, schedule_timesteps: int, initial_p: float = 1.0, decay_rate: float = 0.1):
        if int(schedule_timesteps) < 1:
            raise ValueError(f"schedule_timesteps must be >= 1, got {schedule_timesteps!r}")
        self._T = float(schedule_timesteps)
        self._p0 = float(initial_p)
        self._rate = float(decay_rate)

    def value(self, t: int) -> float:
        return self._p0 * self._rate ** (max(0, t) / self._T)


class PolynomialSchedule(Schedule):
    """From `initial_p` to `final_p` along `(1 - t/T) ** power` over `schedule_timesteps`
    (T), then constant; `power=1` is the linear schedule."""

    def __init__(self, schedule_timesteps: int, final_p: float, initial_p: float = 1.0, power: float = 2.0):
        if int(schedule_timesteps) < 1:
            raise ValueError(f"schedule_timesteps must be >= 1, got {schedule_timesteps!r}")
        self._T = float(schedule_timesteps)
        self._p0, self._p1, self._power = float(initial_p), float(final_p), float(power)

    def value(self, t: int) -> float:
        frac = min(max(0, t), self._T) / self._T
        return self._p1 + (self._p0 - self._p1) * (1.0 - frac) ** self._power


_SCHEDULES = {
    "ConstantSchedule": ConstantSchedule,
    "PiecewiseSchedule": PiecewiseSchedule,
    "LinearSchedule": LinearSchedule,
    "ExponentialSchedule": ExponentialSchedule,
    "PolynomialSchedule": PolynomialSchedule,
}


def schedule_from_spec(spec, key: str = "schedule") -> Schedule:
    """A Schedule from a config value: a Schedule, a number (constant), a list of
    `[timestep, value]` pairs (piecewise linear), or a dict `{"type": name, **kwargs}` with
    name one of ConstantSchedule, PiecewiseSchedule, LinearSchedule, ExponentialSchedule,
    PolynomialSchedule.

    Raises:
        ValueError: naming `key`, the value given and the accepted forms.
    """
    if isinstance(spec, Schedule):
        return spec
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return ConstantSchedule(spec)
    if isinstance(spec, dict):
        kwargs = dict(spec)
        kind = kwargs.pop("type", None)
        cls = (kind if isinstance(kind, type) and issubclass(kind, Schedule)
               else _SCHEDULES.get(kind) if isinstance(kind, str) else None)
        if cls is None:
            raise ValueError(f"`{key}`: schedule type {kind!r} is unknown; use one of {sorted(_SCHEDULES)}")
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise ValueError(f"`{key}`: bad arguments {kwargs!r} for {cls.__name__}: {e}") from None
    try:
        return PiecewiseSchedule(spec)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`{key}` must be a number, a list of [timestep, value] pairs or a dict "
                         f"{{'type': ..., ...}}, got {spec!r}: {e}") from None


def make_schedule(base_value: float, schedule: Optional[Sequence], key: str = "schedule") -> Schedule:
    """A constant schedule at `base_value`, or the one `schedule` describes.

    Args:
        base_value: the value when `schedule` is None.
        schedule: None, a list of `[timestep, value]` pairs (RLlib 1.x's `lr_schedule` format), or
            anything `schedule_from_spec` accepts (e.g. `{"type": "ExponentialSchedule", ...}`).
        key: the config key, for error messages.
    """
    if schedule is None:
        return ConstantSchedule(base_value)
    if isinstance(schedule, (dict, Schedule)):
        return schedule_from_spec(schedule, key)
    try:
        return PiecewiseSchedule(schedule)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`{key}` must be a list of [timestep, value] pairs, got {schedule!r}: {e}") from None
