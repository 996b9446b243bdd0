"""Value checks of config keys, for the common keys and algorithms' keys alike.

A check takes the value and returns it (possibly normalized, e.g. a tuple made a list) or
raises ``InvalidValue("what is allowed")``; ``validate_config`` turns that into a message
naming the key and the value given.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional


class InvalidValue(Exception):
    """Raised by a check with what is allowed, e.g. ``InvalidValue("an int >= 1")``."""

    def message(self, path: str, value: Any) -> str:
        return f"'{path}': {value!r} is invalid; expected {self}"


class _NotAvailableYet(InvalidValue):
    def __init__(self, needs: str, default: Any):
        super().__init__(needs)
        self.needs, self.default = needs, default

    def message(self, path: str, value: Any) -> str:
        return (f"'{path}': {value!r} is not available yet in this version of rlfleet ({self.needs}); "
                f"use the default {self.default!r}")


Check = Callable[[Any], Any]


def is_int(v: Any) -> bool:
    """An integer, not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    """A real number, not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def int_at_least(lo: int) -> Check:
    def check(v: Any) -> Any:
        # YAML/JSON tools often write whole numbers as floats (4000.0); accept those.
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not is_int(v) or v < lo:
            raise InvalidValue(f"an int >= {lo}")
        return v

    return check


def number_in(lo: float, hi: Optional[float] = None) -> Check:
    def check(v: Any) -> Any:
        # Written as "not in range" so that NaN is rejected too.
        if not is_num(v) or not (lo <= v and (hi is None or v <= hi)):
            raise InvalidValue(f"a number in [{lo}, {hi}]" if hi is not None else f"a number >= {lo}")
        return v

    return check


def number_above(lo: float, hi: Optional[float] = None) -> Check:
    """A number > `lo` (and <= `hi` when given): for sizes that must not be zero."""
    def check(v: Any) -> Any:
        if not is_num(v) or not (lo < v and (hi is None or v <= hi)):
            raise InvalidValue(f"a number in ({lo}, {hi}]" if hi is not None else f"a number > {lo}")
        return v

    return check


def finite_number(v: Any) -> Any:
    if not is_num(v) or not math.isfinite(v):
        raise InvalidValue("a finite number")
    return v


def optional(inner: Check, none_means: str) -> Check:
    def check(v: Any) -> Any:
        if v is None:
            return v
        try:
            return inner(v)
        except InvalidValue as e:
            raise InvalidValue(f"None ({none_means}) or {e}") from None

    return check


def one_of(*choices: Any, or_callable: bool = False) -> Check:
    def check(v: Any) -> Any:
        if v in choices or (or_callable and callable(v)):
            return v
        raise InvalidValue(f"one of {list(choices)}" + (" or a callable" if or_callable else ""))

    return check


def dict_value(none_as_empty: bool = False) -> Check:
    def check(v: Any) -> Any:
        if v is None and none_as_empty:
            return {}
        if not isinstance(v, dict):
            raise InvalidValue("a dict" + (" (or None)" if none_as_empty else ""))
        return v

    return check


def positive_int_list(v: Any) -> Any:
    if not isinstance(v, (list, tuple)) or not all(is_int(x) and x > 0 for x in v):
        raise InvalidValue("a list of ints > 0")
    return list(v)


def boolean(v: Any) -> Any:
    """True or False (NumPy bools and the ints 0 / 1 that YAML tools write are taken as such)."""
    if isinstance(v, bool):
        return v
    if type(v).__name__ == "bool_" or (is_int(v) and v in (0, 1)):
        return bool(v)
    raise InvalidValue("True or False")


def activation(v: Any) -> Any:
    """An activation name the built-in networks know."""
    # Imported here: the models package sits above config in the layers.
    from rlfleet.models.fcnet import activation_class

    if v is not None and not isinstance(v, str):
        raise InvalidValue("an activation name (a str) or None")
    try:
        activation_class(v)
    except ValueError as e:
        raise InvalidValue(str(e).split("; use ", 1)[-1]) from None
    return v


def schedule(key: str) -> Check:
    """None (a constant value), `[[timestep, value], ...]`, or a schedule spec dict."""
    def check(v: Any) -> Any:
        if v is None:
            return v
        from rlfleet.utils.schedules import make_schedule

        try:
            make_schedule(0.0, v, key)
        except (ValueError, TypeError, KeyError, AttributeError):
            raise InvalidValue("None, a list of [timestep, value] pairs with increasing timesteps, or a "
                               "dict {'type': 'PolynomialSchedule' | 'ExponentialSchedule' | ..., ...}") from None
        return v

    return check


def not_available(needs: str, default: Any) -> Check:
    """For a key whose feature this version lacks (`needs` says what is missing): any value
    but `default` is an error."""
    def check(v: Any) -> Any:
        if v != default:
            raise _NotAvailableYet(needs, default)
        return v

    return check
