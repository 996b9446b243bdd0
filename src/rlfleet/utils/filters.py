"""Observation filters (running mean/std normalisation) and their synchronisation.

Semantics follow RLlib 1.x's `rllib/utils/filter.py`: a `MeanStdFilter` keeps `rs` (statistics
of all data it has seen, including data merged in from other workers) and `buffer` (statistics
of the data it saw itself since the last `clear_buffer()`). The driver merges each remote
worker's buffer into its own `rs`, then pushes that state back to the remotes, whose buffers
restart empty, so no sample is ever counted twice.

State (`get_state`/`set_state`) holds only NumPy arrays, ints, floats and bools so it can be
stored as JSON + `.npz` without pickling.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

# Added to std before dividing so a constant feature does not blow up to inf.
_STD_EPS = 1e-8


class RunningStat:
    """Running count, mean and sum of squared deviations (Welford / Chan et al.).

    Attributes:
        n: Number of samples pushed.
        mean: Per-element mean, float64 array of `shape`.
        m2: Per-element sum of squared deviations from the mean, float64 array of `shape`.
    """

    __slots__ = ("n", "mean", "m2")

    def __init__(self, shape: Sequence[int] | int = ()) -> None:
        """Args:
        shape: Shape of one sample.
        """
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        self.n = 0
        self.mean = np.zeros(shape, dtype=np.float64)
        self.m2 = np.zeros(shape, dtype=np.float64)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.mean.shape

    def push(self, x: Any) -> None:
        """Adds one sample of `shape`."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.mean.shape:
            raise ValueError(
                f"RunningStat.push: sample shape {x.shape} != stat shape {self.mean.shape}"
            )
        self.n += 1
        if self.n == 1:
            self.mean[...] = x
        else:
            delta = x - self.mean
            self.mean += delta / self.n
            # (x - old_mean) * (x - new_mean) == delta^2 * (n-1)/n
            self.m2 += delta * (x - self.mean)

    def push_batch(self, xs: Any) -> None:
        """Adds a batch of samples stacked along axis 0 (shape `[B, *shape]`), vectorised."""
        xs = np.asarray(xs, dtype=np.float64)
        if xs.shape[1:] != self.mean.shape:
            raise ValueError(
                f"RunningStat.push_batch: batch shape {xs.shape} is not [B, *{self.mean.shape}]"
            )
        if xs.shape[0] == 0:
            return
        self._merge(xs.shape[0], *_batch_moments(xs))

    def update(self, other: "RunningStat") -> None:
        """Merges another stat's samples into this one (Chan et al.'s parallel formula)."""
        if other.mean.shape != self.mean.shape:
            raise ValueError(
                f"RunningStat.update: shapes differ ({self.mean.shape} vs {other.mean.shape})"
            )
        if other.n == 0:
            return
        self._merge(other.n, other.mean, other.m2)

    def _merge(self, n_b: int, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        n_a = self.n
        if n_a == 0:
            self.n = int(n_b)
            self.mean[...] = mean_b
            self.m2[...] = m2_b
            return
        n = n_a + n_b
        delta = mean_b - self.mean
        self.mean += delta * (n_b / n)
        self.m2 += m2_b + delta * delta * (n_a * n_b / n)
        self.n = int(n)

    @property
    def var(self) -> np.ndarray:
        """Sample variance; `mean**2` for fewer than 2 samples, as RLlib 1.x's `RunningStat`."""
        if self.n > 1:
            return self.m2 / (self.n - 1)
        return np.square(self.mean)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def copy(self) -> "RunningStat":
        out = RunningStat.__new__(RunningStat)
        out.n = self.n
        out.mean = self.mean.copy()
        out.m2 = self.m2.copy()
        return out

    def set_from(self, other: "RunningStat") -> None:
        """Makes this stat equal to `other` (copying its arrays)."""
        self.n = other.n
        self.mean = other.mean.copy()
        self.m2 = other.m2.copy()

    def __repr__(self) -> str:
        return f"RunningStat(n={self.n}, mean={self.mean}, std={self.std})"


def _batch_moments(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sum of squared deviations along axis 0 of a non-empty float64 batch."""
    mean = xs.mean(axis=0)
    dev = xs - mean
    m2 = np.einsum("i...,i...->...", dev, dev) if dev.ndim > 1 else dev @ dev
    return mean, m2


class Filter:
    """Base class: a callable that maps one observation to the model's input."""

    def __call__(self, x: Any, update: bool = True) -> np.ndarray:
        """Filters ONE observation; `update` lets the filter learn from it."""
        raise NotImplementedError  # abstract

    def apply_batch(self, xs: Any, update: bool = True) -> np.ndarray:
        """Filters a batch `[B, *shape]` at once."""
        raise NotImplementedError  # abstract

    def apply_changes(self, other: "Filter", with_buffer: bool = False) -> None:
        """Absorbs what `other` saw since its last `clear_buffer()`."""
        raise NotImplementedError  # abstract

    def copy(self) -> "Filter":
        raise NotImplementedError  # abstract

    def sync(self, other: "Filter") -> None:
        """Makes this filter's state equal to `other`'s."""
        raise NotImplementedError  # abstract

    def clear_buffer(self) -> None:
        """Forgets the data seen since the last clear (keeps the overall stats)."""
        raise NotImplementedError  # abstract

    def get_state(self) -> dict[str, Any]:
        """Returns the state as NumPy arrays and plain scalars (no pickling needed)."""
        raise NotImplementedError  # abstract

    def set_state(self, state: Mapping[str, Any]) -> None:
        raise NotImplementedError  # abstract

    # RLlib 1.x's name for `copy` (its `RolloutWorker.get_filters` calls it on every filter).
    def as_serializable(self) -> "Filter":
        return self.copy()


def _float32_unless_uint8(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray) and x.dtype == np.uint8:
        return x
    return np.asarray(x, dtype=np.float32)


class NoFilter(Filter):
    """Identity filter: returns the observation as a float32 array (uint8 images stay
    uint8: the vision net scales them); stateless."""

    def __call__(self, x: Any, update: bool = True) -> np.ndarray:
        return _float32_unless_uint8(x)

    def apply_batch(self, xs: Any, update: bool = True) -> np.ndarray:
        return _float32_unless_uint8(xs)

    def apply_changes(self, other: Filter, with_buffer: bool = False) -> None:
        pass

    def copy(self) -> "NoFilter":
        return self

    def sync(self, other: Filter) -> None:
        pass

    def clear_buffer(self) -> None:
        pass

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: Mapping[str, Any]) -> None:
        pass

    def __repr__(self) -> str:
        return "NoFilter()"


class MeanStdFilter(Filter):
    """Normalises by running mean/std: `clip((x - mean) / (std + 1e-8), -clip, clip)`.

    Attributes:
        rs: Statistics of all data (own and merged from other filters).
        buffer: Statistics of the data this filter saw since the last `clear_buffer()`.
    """

    def __init__(
        self,
        shape: Sequence[int] | int,
        demean: bool = True,
        destd: bool = True,
        clip: float | None = 10.0,
    ) -> None:
        """Args:
        shape: Shape of one observation.
        demean: Subtract the running mean.
        destd: Divide by the running std.
        clip: Clip the output to [-clip, clip]; None or 0 disables clipping.
        """
        self.shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        self.demean = bool(demean)
        self.destd = bool(destd)
        self.clip = clip
        self.rs = RunningStat(self.shape)
        self.buffer = RunningStat(self.shape)

    def _normalise(self, x: np.ndarray) -> np.ndarray:
        # x is a fresh float64 array we may modify in place.
        if self.demean:
            x -= self.rs.mean
        if self.destd:
            x /= self.rs.std + _STD_EPS
        if self.clip:
            np.clip(x, -self.clip, self.clip, out=x)
        return x.astype(np.float32)

    def __call__(self, x: Any, update: bool = True) -> np.ndarray:
        x = np.array(x, dtype=np.float64)  # a copy: normalised in place below
        if update:
            self.rs.push(x)
            self.buffer.push(x)
        elif x.shape != self.shape:
            raise ValueError(f"MeanStdFilter: observation shape {x.shape} != {self.shape}")
        return self._normalise(x)

    def apply_batch(self, xs: Any, update: bool = True) -> np.ndarray:
        xs = np.array(xs, dtype=np.float64)
        if xs.shape[1:] != self.shape:
            raise ValueError(f"MeanStdFilter: batch shape {xs.shape} is not [B, *{self.shape}]")
        if update and xs.shape[0]:
            # Moments of the batch once, merged into both (cheaper than two push_batch calls).
            mean, m2 = _batch_moments(xs)
            self.rs._merge(xs.shape[0], mean, m2)
            self.buffer._merge(xs.shape[0], mean, m2)
        return self._normalise(xs)

    def apply_changes(self, other: Filter, with_buffer: bool = False) -> None:
        """Merges `other.buffer` into `self.rs` (and into `self.buffer` if `with_buffer`)."""
        if not isinstance(other, MeanStdFilter):
            raise TypeError(f"MeanStdFilter.apply_changes: expected a MeanStdFilter, got {other!r}")
        self.rs.update(other.buffer)
        if with_buffer:
            self.buffer.update(other.buffer)

    def copy(self) -> "MeanStdFilter":
        out = MeanStdFilter(self.shape, self.demean, self.destd, self.clip)
        out.sync(self)
        return out

    def sync(self, other: Filter) -> None:
        """Copies `other`'s settings, `rs` and `buffer`."""
        if not isinstance(other, MeanStdFilter):
            raise TypeError(f"MeanStdFilter.sync: expected a MeanStdFilter, got {other!r}")
        self.shape = other.shape
        self.demean = other.demean
        self.destd = other.destd
        self.clip = other.clip
        self.rs.set_from(other.rs)
        self.buffer.set_from(other.buffer)

    def clear_buffer(self) -> None:
        self.buffer = RunningStat(self.shape)

    def get_state(self) -> dict[str, Any]:
        return {
            "shape": np.asarray(self.shape, dtype=np.int64),
            "demean": self.demean,
            "destd": self.destd,
            # 0.0 means "no clipping", like None (RLlib 1.x's filter tests `if self.clip`).
            "clip": float(self.clip) if self.clip else 0.0,
            "rs_n": int(self.rs.n),
            "rs_mean": self.rs.mean.copy(),
            "rs_m2": self.rs.m2.copy(),
            "buffer_n": int(self.buffer.n),
            "buffer_mean": self.buffer.mean.copy(),
            "buffer_m2": self.buffer.m2.copy(),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        missing = {"rs_n", "rs_mean", "rs_m2", "buffer_n", "buffer_mean", "buffer_m2"} - set(state)
        if missing:
            raise ValueError(f"MeanStdFilter.set_state: state lacks keys {sorted(missing)}")
        if "shape" in state:
            self.shape = tuple(int(s) for s in np.asarray(state["shape"]).reshape(-1))
        self.demean = bool(state.get("demean", self.demean))
        self.destd = bool(state.get("destd", self.destd))
        clip = float(state.get("clip", self.clip or 0.0))
        self.clip = clip if clip else None
        for name, stat in (("rs", RunningStat(self.shape)), ("buffer", RunningStat(self.shape))):
            stat.n = int(state[f"{name}_n"])
            stat.mean = np.array(state[f"{name}_mean"], dtype=np.float64).reshape(self.shape)
            stat.m2 = np.array(state[f"{name}_m2"], dtype=np.float64).reshape(self.shape)
            setattr(self, name, stat)

    def __repr__(self) -> str:
        return (
            f"MeanStdFilter({self.shape}, demean={self.demean}, destd={self.destd}, "
            f"clip={self.clip}, n={self.rs.n}, buffer_n={self.buffer.n})"
        )


FILTER_NAMES = ("NoFilter", "MeanStdFilter", "ConcurrentMeanStdFilter")


def get_filter(
    name_or_callable: Union[str, Callable[[tuple[int, ...]], Filter]],
    shape: Sequence[int] | int,
) -> Filter:
    """Builds the filter named by the `observation_filter` config key.

    Args:
        name_or_callable: "NoFilter", "MeanStdFilter" ("ConcurrentMeanStdFilter" is accepted
            as an alias: our filters are used from one thread), or a callable taking the
            observation shape and returning a `Filter`.
        shape: Shape of one (preprocessed) observation.

    Returns:
        A new filter.
    """
    if name_or_callable == "NoFilter":
        return NoFilter()
    if name_or_callable in ("MeanStdFilter", "ConcurrentMeanStdFilter"):
        # As RLlib 1.x's `get_filter`, the configured observation filter does not clip.
        return MeanStdFilter(shape, clip=None)
    if callable(name_or_callable):
        return name_or_callable(shape)
    raise ValueError(
        f"observation_filter={name_or_callable!r} is not supported; use one of "
        f"{list(FILTER_NAMES)} or a callable taking the observation shape and returning a Filter."
    )


class FilterManager:
    """Synchronises filters between the local worker and remote workers (in-process form)."""

    @staticmethod
    def synchronize(
        local_filters: Mapping[str, Filter],
        remote_filters_list: Sequence[Mapping[str, Filter]],
        update_remote: bool = True,
    ) -> None:
        """Merges every remote filter's buffer into the local filter of the same key.

        Afterwards each remote buffer is empty; with `update_remote`, each remote filter equals
        the local one (with an empty buffer, so its data is never merged twice).

        Args:
            local_filters: Policy id -> the local worker's filter (updated in place).
            remote_filters_list: One such dict per remote worker (updated in place).
            update_remote: Whether to copy the merged local state back to the remotes.
        """
        for i, remote in enumerate(remote_filters_list):
            for key, local in local_filters.items():
                if key not in remote:
                    raise ValueError(
                        f"FilterManager.synchronize: remote worker #{i} has no filter for "
                        f"{key!r} (it has {sorted(remote)})"
                    )
                local.apply_changes(remote[key], with_buffer=False)
                remote[key].clear_buffer()
        if update_remote:
            for remote in remote_filters_list:
                for key, local in local_filters.items():
                    remote[key].sync(local)
                    remote[key].clear_buffer()
