"""The lock that a trainer with a learner thread shares with that thread: weights and state
are read or set between two updates, never in the middle of one."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Dict, Iterator, List, Optional


class LearnerLock:
    """For trainers whose learner thread updates the weights under `self._lock` (an RLock):
    reading or setting weights and state takes the lock too, and `learner_paused()` holds it
    for a block. Subclasses drop their caches of the weights in `_weights_changed()`."""

    _lock: threading.RLock

    @contextlib.contextmanager
    def learner_paused(self) -> Iterator[None]:
        """Holds the learner thread between two updates: weights, state and checkpoints
        taken inside the block agree with each other."""
        with self._lock:
            yield

    def get_weights(self, policies: Optional[List[str]] = None) -> Dict[str, dict]:
        with self._lock:
            return super().get_weights(policies)

    def set_weights(self, weights: Dict[str, dict]) -> None:
        with self._lock:
            super().set_weights(weights)
        self._weights_changed()

    def get_state(self) -> Dict[str, Any]:
        with self._lock:
            return super().get_state()

    def set_state(self, state: Dict[str, Any]) -> None:
        with self._lock:
            super().set_state(state)
        self._weights_changed()

    def _weights_changed(self) -> None:
        """Called after the weights were set from outside the learner."""


__all__ = ["LearnerLock"]
