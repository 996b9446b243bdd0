"""BLAS thread control for NumPy's matrix products (the hot loops of the NumPy learners and actor)."""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from typing import Any, Callable, Iterator, Optional

import numpy as np


def blas_thread_setter() -> Optional[Callable[[int], int]]:
    """OpenBLAS's `openblas_set_num_threads_local` (0.3.27+) from the library NumPy loaded:
    sets the calling thread's BLAS thread count, returns the previous one. None elsewhere
    (another BLAS, or a NumPy without bundled OpenBLAS): then nothing changes."""
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "*openblas*"))):
        try:
            setter = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        setter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
        return setter
    return None


_BLAS_SETTER: Any = False  # not looked up yet


@contextlib.contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """NumPy's matrix products on `count` threads for the calling thread while inside
    (restored after). Thread-local: other threads keep their own count."""
    global _BLAS_SETTER
    if _BLAS_SETTER is False:
        _BLAS_SETTER = blas_thread_setter()
    if _BLAS_SETTER is None:
        yield
        return
    previous = _BLAS_SETTER(int(count))
    try:
        yield
    finally:
        _BLAS_SETTER(previous)


def single_threaded_blas():
    """NumPy's matrix products on the calling thread alone while inside (restored after).

    The sampler's products are small (a few rows by a few hundred): splitting them over
    threads costs more than it saves, and on a loaded machine each waits for a core (a
    200 x 256 x 256 product measured 20x slower with 2 threads than with 1 under load;
    one row 2x). Thread-local: a learner thread beside it keeps its threads.
    """
    return blas_threads(1)


__all__ = ["blas_thread_setter", "blas_threads", "single_threaded_blas"]
