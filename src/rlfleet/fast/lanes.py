"""Two lanes of work for one learner update, and the choice, by measurement, of whether to use them.

An off-policy update is mostly pairs of independent pieces: the twin critics' forward and
backward passes, the draws at s and s'. `Lanes.pair(first, second)` runs `second` on one
helper thread while the caller runs `first`; NumPy releases the GIL in its matrix products
and in its element-wise loops over large arrays, so on an idle two-core machine the pair
takes about the time of the longer piece. Each lane multiplies on one BLAS thread (OpenBLAS's
thread count is per thread): two lanes of one thread each, never two lanes of two.

The results do not depend on the lanes: every piece runs the same operations on the same
arrays in either mode (OpenBLAS splits a product over rows and columns, never over the
summed dimension, so even the thread count leaves the bits alone; tests/fast/test_lanes.py checks
an update bit for bit both ways). Only the time does.

Whether two lanes are faster depends on the machine's load: on a busy machine a lane waits
for a core and the pair is slower than one thread doing both (blas.py measured a product 20x
slower with two threads under load). `LaneChooser` therefore times updates in both modes
from time to time and keeps the faster one, so a learner never runs slower than on one lane
for long, however busy the machine.
"""
from __future__ import annotations

import math
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple, TypeVar

import numpy as np

from rlfleet.fast.blas import blas_threads

A = TypeVar("A")
B = TypeVar("B")


class Lanes:
    """The caller's thread plus, when `parallel`, one helper thread for `pair`'s second piece.

    Args:
        count: 1 (everything on the caller's thread) or 2.
    """

    def __init__(self, count: int = 1) -> None:
        if count not in (1, 2):
            raise ValueError(f"Lanes(count={count}): 1 or 2 lanes")
        self.count = count
        self.parallel = count == 2
        self._pool: Optional[ThreadPoolExecutor] = None

    def pair(self, first: Callable[[], A], second: Callable[[], B]) -> Tuple[A, B]:
        """`(first(), second())`, side by side when `parallel` (the caller runs `first`)."""
        if not self.parallel:
            return first(), second()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="rlfleet-lane")
        future = self._pool.submit(_as_caller, second, np.geterr())
        try:
            a = first()
        finally:
            b = future.result()  # waits (and re-raises) even when `first` raised
        return a, b

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __del__(self) -> None:
        pool = self._pool
        if pool is not None:
            pool.shutdown(wait=False)


# One lane: for callers that do not split their work.
SERIAL = Lanes(1)


def _as_caller(fn: Callable[[], B], errors: dict) -> B:
    """`fn()` on one BLAS thread, with the caller's floating-point error handling (NumPy's
    `errstate` does not follow work onto another thread)."""
    with blas_threads(1), np.errstate(**errors):
        return fn()


class LaneChooser:
    """Picks, by timing, whether a learner's updates use two lanes or one.

    After `warmup` updates (first-call costs), `probes` timed updates per mode, alternated,
    decide; the choice stands for `interval` updates, then `probes // 2` per mode check it
    again (the machine's load changes). With one lane available it never probes.

    Args:
        available: the lanes the learner may use (1 or 2).
        fixed: True / False: always two lanes / one (no timing: benchmarks and tests); None: choose.
        clock: the timer (tests pass a fake one).
    """

    def __init__(self, available: int, *, fixed: Optional[bool] = None, warmup: int = 3, probes: int = 6,
                 interval: int = 2000, clock: Callable[[], float] = time.perf_counter) -> None:
        self.lanes = Lanes(1)
        self.available = max(1, min(2, int(available)))
        self.fixed = fixed
        self._warmup, self._probes, self._interval = warmup, probes, interval
        self._clock = clock
        self._updates = 0
        self._until_probe = warmup
        self._schedule: List[bool] = []  # the modes still to time in this probe round
        self._times: dict = {True: [], False: []}
        self._mode_in_use = False
        self._start = 0.0

    @property
    def parallel(self) -> bool:
        """Whether the current update runs on two lanes."""
        return self.lanes.parallel

    def start(self) -> None:
        """Called before each update: sets the mode it runs in."""
        parallel = False
        if self.fixed is not None:
            parallel = self.fixed
        elif self.available > 1:
            if not self._schedule and self._until_probe <= 0:
                n = self._probes if not self._times[True] else max(1, self._probes // 2)
                self._schedule = [m for _ in range(n) for m in (True, False)]
                self._times = {True: [], False: []}
            parallel = self._schedule[0] if self._schedule else self._mode_in_use
        if parallel and self.lanes.count == 1:
            self.lanes = Lanes(2)
        self.lanes.parallel = parallel
        self._start = self._clock()

    def finish(self) -> None:
        """Called after each update: records its time while probing, and decides."""
        elapsed = self._clock() - self._start
        self._updates += 1
        if self.fixed is not None:
            return
        if self._schedule:
            mode = self._schedule.pop(0)
            self._times[mode].append(elapsed)
            if not self._schedule:
                self._mode_in_use = statistics.median(self._times[True]) < statistics.median(self._times[False])
                self._until_probe = self._interval
        else:
            self._until_probe -= 1

    def close(self) -> None:
        self.lanes.close()


def learner_lanes(config: dict) -> int:
    """How many lanes (1 or 2) a learner in this process may use.

    An explicit thread cap wins (`OMP_NUM_THREADS`, as for torch's threads). Otherwise a
    trainer without remote workers may use every core the process can run on (nothing else of
    its own competes for them), and one with remote workers the cores it reserved for its
    driver (`num_cpus_for_driver`): the workers hold the others.
    """
    cap = os.environ.get("OMP_NUM_THREADS", "").strip()
    if cap.isdigit() and int(cap) >= 1:
        return min(2, int(cap))
    if int(config.get("num_workers") or 0) == 0:
        return min(2, _usable_cores())
    return min(2, max(1, int(math.ceil(float(config.get("num_cpus_for_driver") or 1)))))


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


__all__ = ["SERIAL", "LaneChooser", "Lanes", "learner_lanes"]
