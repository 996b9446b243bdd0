"""Env checks at the boundary: what an env hands the sampler is checked where it arrives.

Two kinds of error, both `EnvError`s that say where they happened (env id, worker index,
sub-env index, episode id, step and, on the multi-agent path, agent id):

- `EnvError` (a RuntimeError): the env's own `reset()` / `step()` raised; the original
  exception is chained (`raise EnvError(...) from original`).
- `EnvCheckError` (an EnvError and a ValueError): the env broke its contract: an
  observation outside its observation space (wrong structure, shape, or a dtype that
  cannot be cast safely; a Box value outside the bounds by more than `BOX_TOLERANCE`),
  a NaN or infinite observation value, a reward that is not a finite number, or a
  `reset()` / `step()` that does not return what Gymnasium envs return.

How the samplers use this module:

| when                                      | what is checked                                        |
| ----------------------------------------- | ------------------------------------------------------ |
| every first observation, and every step   | each raw observation against the space in detail       |
| until the sampler's first episode ends    | (`observation_problem`: structure, shape, dtype, ...)  |
| later steps                               | rewards finite (one sum per step); preprocessed        |
|                                           | observations finite and inside the bounds: one sum per |
|                                           | step and `ObsBatchCheck` once per chunk (a Box env     |
|                                           | without a filter), else `ObsBatchCheck` every step     |
| later steps, `disable_env_checking: True` | nothing                                                |
| always                                    | a preprocessor that cannot read an observation (the    |
|                                           | error explains the observation instead of the reshape) |

A failed vectorised check is explained in detail; the error names the exact step either way.
"""
from __future__ import annotations

import math
from operator import le as _le
from typing import Any, Dict, Mapping, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# How far outside its Box's bounds an observation value may be (absolute, scaled by the
# bound's magnitude when that is above 1): float round-off of an env that clips to its
# bounds in float64 and returns float32, or the reverse, is no error.
BOX_TOLERANCE = 1e-4

_CONTEXT_FIELDS = ("env_id", "worker_index", "sub_env_index", "episode_id", "step", "agent_id")


class EnvError(RuntimeError):
    """An env failed (its `reset()` / `step()` raised: the original is `__cause__`) or broke
    its contract (`EnvCheckError`). The message and the attributes say where.

    Attributes:
        what: what went wrong, without the location.
        env_id: the `env` config value (a registered name, Gymnasium id or class name).
        worker_index: 0 for the trainer's own worker, 1.. for remote ones.
        sub_env_index: which of the worker's `num_envs_per_worker` envs.
        episode_id: the episode's id (as in the batches' `eps_id` column).
        step: the episode's step the env was at (0: its reset, 1: its first step, ...).
        agent_id: the agent, on the multi-agent path.
    """

    def __init__(self, what: str, *, env_id: Optional[str] = None, worker_index: Optional[int] = None,
                 sub_env_index: Optional[int] = None, episode_id: Optional[int] = None,
                 step: Optional[int] = None, agent_id: Any = None):
        self.what = what
        self.env_id = env_id
        self.worker_index = worker_index
        self.sub_env_index = sub_env_index
        self.episode_id = episode_id
        self.step = step
        self.agent_id = agent_id
        super().__init__(self._message())

    def context(self) -> Dict[str, Any]:
        """The location fields (None where unknown)."""
        return {name: getattr(self, name) for name in _CONTEXT_FIELDS}

    def with_context(self, **context: Any) -> "EnvError":
        """A copy with the unknown location fields filled from `context` (same cause)."""
        merged = {k: v if v is not None else context.get(k) for k, v in self.context().items()}
        err = type(self)(self.what, **merged)
        err.__cause__ = self.__cause__
        err.__suppress_context__ = True
        return err

    def _message(self) -> str:
        parts = []
        if self.env_id is not None:
            parts.append(f"env {self.env_id!r}")
        labels = (("worker_index", "worker"), ("sub_env_index", "sub-env"), ("episode_id", "episode"),
                  ("step", "step"), ("agent_id", "agent"))
        for name, label in labels:
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{label} {value!r}" if name == "agent_id" else f"{label} {value}")
        where = ", ".join(parts)
        return f"{where[:1].upper()}{where[1:]}: {self.what}" if where else self.what

    def __reduce__(self):
        # Keyword-only fields: the default reduce (cls(*args)) would lose them when the
        # error crosses processes (a remote worker's error reaches the trainer through Ray).
        return _rebuild, (type(self), self.what, self.context())


class EnvCheckError(EnvError, ValueError):
    """An env broke its contract (an observation outside its space, a non-finite reward,
    ...); see the module docstring."""


def _rebuild(cls, what: str, context: Dict[str, Any]) -> EnvError:
    return cls(what, **context)


def env_call_error(call: str, error: BaseException, **context: Any) -> EnvError:
    """The EnvError for an exception `error` raised by the env's `call` ("reset()", "step()")."""
    return EnvError(f"the env's {call} raised {type(error).__name__}: {error}", **context)


# --- one observation, in detail ------------------------------------------------------
# What an out-of-bounds observation's message advises by default: the ways out for training.
# A caller whose user cannot act on them (an inference server's HTTP client) gives its own.
TRAINING_BOUNDS_FIX = ("If the env can legitimately leave these bounds (some Gymnasium envs declare approximate "
                       "ones, e.g. LunarLander's position), declare a wider observation_space (e.g. gymnasium."
                       "wrappers.TransformObservation(env, lambda obs: obs, Box(-inf, inf, shape))) or set "
                       "disable_env_checking: True (then only the first episode is checked)")


def observation_problem(obs: Any, space: gym.Space, where: str = "observation", *,
                        bounds_fix: str = TRAINING_BOUNDS_FIX) -> Optional[str]:
    """What is wrong with `obs` for `space`, in words (None: nothing).

    Checks the structure (Dict keys, Tuple length), the shape, that the dtype can be cast
    safely ("same kind": float64 for a float32 Box is fine, a float for a Discrete is not),
    NaN / infinite values and Box bounds (within `BOX_TOLERANCE`).

    Args:
        obs: one raw observation, as the env returned it.
        space: the observation space it should belong to.
        where: how to name it in the message (nested parts add `[i]` / `['key']`).
        bounds_fix: what the message of a value outside a Box's bounds advises.
    """
    if isinstance(space, spaces.Box):
        return _box_problem(obs, space, where, bounds_fix)
    if isinstance(space, spaces.Discrete):
        arr, problem = _as_array(obs, space, where)
        if problem is None and arr.shape != ():
            problem = f"{where} of shape {arr.shape} for {space} (one integer expected)"
        if problem is None and not np.issubdtype(arr.dtype, np.integer):
            problem = f"{where} {_value(arr)} of dtype {arr.dtype} for {space} (an integer expected)"
        if problem is None and not (space.start <= int(arr) < space.start + space.n):
            problem = f"{where} {int(arr)} outside {space} (valid: {space.start}..{space.start + space.n - 1})"
        return problem
    if isinstance(space, spaces.MultiDiscrete):
        arr, problem = _as_array(obs, space, where)
        if problem is None and arr.shape != space.shape:
            problem = f"{where} of shape {arr.shape} for {space}"
        if problem is None and not np.issubdtype(arr.dtype, np.integer):
            problem = f"{where} of dtype {arr.dtype} for {space} (integers expected)"
        if problem is None:
            bad = np.argwhere((arr < space.start) | (arr >= space.start + space.nvec))
            if len(bad):
                idx = tuple(int(i) for i in bad[0])
                problem = f"{where}{list(idx)} = {arr[idx]} outside {space}"
        return problem
    if isinstance(space, spaces.MultiBinary):
        arr, problem = _as_array(obs, space, where)
        if problem is None and arr.shape != tuple(space.shape):
            problem = f"{where} of shape {arr.shape} for {space}"
        if problem is None and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            problem = f"{where} of dtype {arr.dtype} for {space} (0/1 integers expected)"
        if problem is None and not np.isin(arr, (0, 1)).all():
            problem = f"{where} has values other than 0 and 1 for {space}"
        return problem
    if isinstance(space, spaces.Tuple):
        if not isinstance(obs, (tuple, list)):
            return f"{where} of type {type(obs).__name__} for {space} (a tuple expected)"
        if len(obs) != len(space.spaces):
            return f"{where} with {len(obs)} components for {space} ({len(space.spaces)} expected)"
        for i, (part, sub) in enumerate(zip(obs, space.spaces)):
            problem = observation_problem(part, sub, f"{where}[{i}]", bounds_fix=bounds_fix)
            if problem is not None:
                return problem
        return None
    if isinstance(space, spaces.Dict):
        if not isinstance(obs, Mapping):
            return f"{where} of type {type(obs).__name__} for {space} (a dict expected)"
        if set(obs) != set(space.spaces):
            return (f"{where} with keys {sorted(map(str, obs))} for a Dict space with keys "
                    f"{sorted(map(str, space.spaces))}")
        for key, sub in space.spaces.items():
            problem = observation_problem(obs[key], sub, f"{where}[{key!r}]", bounds_fix=bounds_fix)
            if problem is not None:
                return problem
        return None
    try:
        ok = space.contains(obs)
    except Exception:  # a malformed observation may make contains() itself raise
        ok = False
    return None if ok else f"{where} {_describe(obs)} is not in {space}"


def _as_array(obs: Any, space: gym.Space, where: str):
    try:
        arr = np.asarray(obs)
    except Exception:
        return None, f"{where} of type {type(obs).__name__} for {space} (cannot be read as an array)"
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        return None, f"{where} of type {type(obs).__name__} (dtype {arr.dtype}) for {space} (numbers expected)"
    return arr, None


def _box_problem(obs: Any, space: spaces.Box, where: str, bounds_fix: str) -> Optional[str]:
    arr, problem = _as_array(obs, space, where)
    if problem is not None:
        return problem
    if arr.shape != space.shape:
        return f"{where} of shape {arr.shape} for {space}"
    if not (arr.dtype == np.bool_ or np.can_cast(arr.dtype, space.dtype, casting="same_kind")):
        return f"{where} of dtype {arr.dtype} for {space} (cannot be cast safely to {space.dtype})"
    if arr.dtype.kind in "fc":
        finite = np.isfinite(arr)
        if not finite.all():
            idx = tuple(int(i) for i in np.argwhere(~finite)[0])
            return f"{where}{_index(idx)} is {arr[idx]} for {space} (observations must be finite)"
    low, high = _tolerant_bounds(space)
    with np.errstate(invalid="ignore", over="ignore"):
        values = arr.astype(np.float64)
        below, above = values < low, values > high
    for mask, side, bound in ((below, "below", space.low), (above, "above", space.high)):
        if mask.any():
            idx = tuple(int(i) for i in np.argwhere(mask)[0])
            shown = " ".join(str(space).split())  # NumPy pads the bounds of a Box with mixed magnitudes
            return (f"{where}{_index(idx)} = {values[idx]:.6g} is {side} the bound {float(bound[idx]):.6g} of "
                    f"{shown} (by more than the tolerance {BOX_TOLERANCE:g}; this element's range is "
                    f"[{float(space.low[idx]):.6g}, {float(space.high[idx]):.6g}]). {bounds_fix}")
    return None


def _tolerant_bounds(space: spaces.Box):
    low = np.asarray(space.low, np.float64)
    high = np.asarray(space.high, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        low = low - BOX_TOLERANCE * np.maximum(1.0, np.abs(low))
        high = high + BOX_TOLERANCE * np.maximum(1.0, np.abs(high))
    return low, high


def _index(idx: tuple) -> str:
    return f"[{', '.join(map(str, idx))}]" if idx else ""


def _value(arr: np.ndarray) -> str:
    return repr(arr.item()) if arr.size == 1 else f"<array shape={arr.shape}>"


def _describe(obs: Any) -> str:
    try:
        arr = np.asarray(obs)
        if arr.size <= 8 and arr.dtype != object:
            return f"{obs!r} (shape {arr.shape}, dtype {arr.dtype})"
        return f"<{type(obs).__name__} shape {arr.shape}, dtype {arr.dtype}>"
    except Exception:
        return f"<{type(obs).__name__}>"


def reward_problem(reward: Any) -> Optional[str]:
    """What is wrong with one reward (None: a finite number)."""
    try:
        if isinstance(reward, (str, bytes)):
            raise TypeError
        value = float(reward)
    except (TypeError, ValueError):
        return f"reward {reward!r} of type {type(reward).__name__} (a number expected)"
    if not math.isfinite(value):
        return f"reward is {value} (rewards must be finite numbers)"
    return None


# --- a batch of preprocessed observations, fast ---------------------------------------
class ObsBatchCheck:
    """The per-step check on stacked preprocessed observations `[B, *shape]`: every value
    inside the preprocessor's output Box (within `BOX_TOLERANCE`) and finite.

    Written for NumPy's per-call cost, which dominates on a few small rows; NaN fails every
    comparison, so it needs no call of its own:

    | bounds                                          | per call                          |
    | ----------------------------------------------- | --------------------------------- |
    | an integer dtype spanning them (uint8 images)   | nothing                           |
    | the same for every element                      | one min and one max (2 calls)     |
    | per element, each two-sided or (-inf, inf)      | max of abs(b * a - c) <= 1 (3-4)  |
    | otherwise (one-sided)                           | two comparisons, two `all` (4)    |

    (a, c map each element's bounds onto [-1, 1]; a is 0 where both bounds are infinite,
    so that an infinite value there becomes NaN and fails.)

    Args:
        space: the preprocessor's `observation_space` (a Box; anything else is not checked).

    Attributes:
        trivial: nothing to check (then `ok` is always True).
    """

    def __init__(self, space: gym.Space):
        self.space = space
        self.trivial = not isinstance(space, spaces.Box)  # a custom preprocessor's output
        if self.trivial:
            return
        low, high = _tolerant_bounds(space)
        if np.issubdtype(space.dtype, np.integer):
            info = np.iinfo(space.dtype)
            # An integer array cannot be NaN; only bounds narrower than its dtype's range matter.
            self.trivial = bool(np.all(low <= info.min) and np.all(high >= info.max))
        if np.prod(space.shape, dtype=np.int64) == 0:
            self.trivial = True
        big = float(np.finfo(np.float32).max)
        low, high = np.maximum(low, -big).reshape(-1), np.minimum(high, big).reshape(-1)
        self._uniform = low.size > 0 and bool(np.all(low == low[0]) and np.all(high == high[0]))
        self._lo, self._hi = (float(low[0]), float(high[0])) if self._uniform else (None, None)
        unbounded = (low == -big) & (high == big)
        self._scaled = not self._uniform and bool(np.all(unbounded | ((low > -big) & (high < big))))
        self._any_unbounded = bool(unbounded.any())
        if self._scaled:
            half = np.where(unbounded, 1.0, (high - low) / 2)
            center = np.where(unbounded, 0.0, (high + low) / 2)
            shape = tuple(space.shape)
            self._a = np.where(unbounded, 0.0, 1.0 / half).astype(np.float32).reshape(shape)
            self._c = None if not center.any() else (center / half).astype(np.float32).reshape(shape)
        self._low = low.astype(np.float32).reshape(space.shape)
        self._high = high.astype(np.float32).reshape(space.shape)

    def ok(self, batch: np.ndarray) -> bool:
        """Whether every observation of `batch` (`[B, *shape]`) is inside the bounds and finite."""
        if self.trivial:
            return True
        if self._uniform:
            return bool(self._lo <= np.minimum.reduce(batch, axis=None) and
                        np.maximum.reduce(batch, axis=None) <= self._hi)
        if self._scaled:
            if self._any_unbounded:
                with np.errstate(invalid="ignore"):  # inf * 0 is NaN (and fails) without a warning
                    y = batch * self._a
            else:
                y = batch * self._a
            if self._c is not None:
                y -= self._c
            return bool(np.maximum.reduce(np.abs(y, out=y), axis=None) <= 1.0)
        return bool((batch >= self._low).all()) and bool((batch <= self._high).all())


_FLOAT32 = np.dtype(np.float32)


class ObsRowCheck:
    """`ObsBatchCheck` for one preprocessed observation at a time (the multi-agent path
    checks each agent's as it arrives): the same question, every value inside the Box
    (within `BOX_TOLERANCE`) and finite, for a fraction of NumPy's per-call cost on small
    observations.

    A float32 observation of at most `SMALL` values is compared as Python floats against
    the tolerant bounds (infinite bounds clamped to float32's range, so an infinite value
    fails; NaN fails every comparison), exactly rather than through `ObsBatchCheck`'s
    float32 rescaling; anything else goes to `ObsBatchCheck.ok`.

    Args:
        space: the preprocessor's `observation_space`.

    Attributes:
        batch: the `ObsBatchCheck` of `space`; its `trivial` (nothing to check) is this
            check's too.
    """

    SMALL = 64

    def __init__(self, space: gym.Space):
        self.batch = ObsBatchCheck(space)
        self._lo = self._hi = None
        if (self.batch.trivial or not isinstance(space, spaces.Box) or space.dtype != np.float32
                or not 0 < int(np.prod(space.shape, dtype=np.int64)) <= self.SMALL):
            return
        big = float(np.finfo(np.float32).max)
        low, high = _tolerant_bounds(space)
        self._lo = np.maximum(low, -big).reshape(-1).tolist()
        self._hi = np.minimum(high, big).reshape(-1).tolist()
        self._shape = tuple(space.shape)

    @property
    def trivial(self) -> bool:
        return self.batch.trivial

    @trivial.setter
    def trivial(self, value: bool) -> None:
        self.batch.trivial = value

    def ok(self, obs: Any) -> bool:
        """Whether the observation `obs` (`[*shape]`) is inside the bounds and finite."""
        if self.batch.trivial:
            return True
        lo = self._lo
        if lo is not None and type(obs) is np.ndarray and obs.shape == self._shape and obs.dtype == _FLOAT32:
            values = obs.tolist() if obs.ndim == 1 else obs.ravel().tolist()
            return all(map(_le, lo, values)) and all(map(_le, values, self._hi))
        return self.batch.ok(obs)


__all__ = ["BOX_TOLERANCE", "TRAINING_BOUNDS_FIX", "EnvCheckError", "EnvError", "ObsBatchCheck", "env_call_error",
           "observation_problem", "reward_problem"]
