"""Importing torch without the cyclic garbage collector's repeated scans of it.

Importing torch creates a few hundred thousand long-lived objects (modules, functions,
classes) and none that are garbage. With the collector on, its full collections re-scan that
growing heap during the import (~0.2 s of a 1.6 s import here), and every later full
collection scans it again (~0.1 s more before the first `train()` result). Pausing the
collector for the import and then moving what exists to the permanent generation
(`gc.freeze()`, the standard library's tool for exactly this) removes both; nothing made
afterwards is affected, and frozen objects are the modules a process keeps anyway.
"""
from __future__ import annotations

import gc
import sys


def import_torch() -> None:
    """Imports torch, if no one has yet, with the collector paused, then freezes the heap."""
    if "torch" in sys.modules:
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        import torch  # noqa: F401  (the import is the point)
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()
