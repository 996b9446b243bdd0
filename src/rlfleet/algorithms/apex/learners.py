"""Ape-X's learner, in two wirings of one interface: a thread that learns while the trainer's
loop samples and replays (remote workers and shards), or inline, in the loop itself (everything
in this process: the sampling worker shares the learner's model, so learning waits its turn).

Both take `(shard index, {policy_id: replayed batch})` items through `put` and hand back what
`learn(item)` returned, in order, through `take_outputs`.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional


class _LearnerBase:
    def __init__(self, learn: Callable[[Any], Any], lock: threading.RLock, queue_size: int):
        self.learn, self.lock = learn, lock
        self.queue_size = int(queue_size)
        self.error: Optional[BaseException] = None
        self.learn_time_s = 0.0

    def _learn_timed(self, item: Any) -> Any:
        start = time.perf_counter()
        with self.lock:
            out = self.learn(item)
        self.learn_time_s += time.perf_counter() - start
        return out

    def raise_error(self) -> None:
        """Raises the learner's failure in the trainer's loop."""
        if self.error is not None:
            raise RuntimeError(f"the learner thread failed: {self.error}") from self.error


class InlineLearner(_LearnerBase):
    """Learns on each item as it is put (no thread, no queue)."""

    def __init__(self, learn: Callable[[Any], Any], lock: threading.RLock, queue_size: int):
        super().__init__(learn, lock, queue_size)
        self._outputs: List[Any] = []

    def put(self, item: Any) -> bool:
        self._outputs.append(self._learn_timed(item))
        return True

    def take_outputs(self) -> List[Any]:
        out, self._outputs = self._outputs, []
        return out

    def queue_stats(self) -> Dict[str, int]:
        return {"size_now": 0, "capacity": self.queue_size}

    def stop(self) -> None:
        pass


class LearnerThread(_LearnerBase, threading.Thread):
    """Learns on the items put on its queue (`learner_queue_size` at most; `put` drops an item
    that waited a second for room)."""

    def __init__(self, learn: Callable[[Any], Any], lock: threading.RLock, queue_size: int):
        threading.Thread.__init__(self, daemon=True, name="rlfleet-apex-learner")
        _LearnerBase.__init__(self, learn, lock, queue_size)
        self.inqueue: "queue.Queue" = queue.Queue(maxsize=self.queue_size)
        self.outqueue: "queue.Queue" = queue.Queue()
        self._stopped = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                item = self.inqueue.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                return
            try:
                self.outqueue.put(self._learn_timed(item))
            except BaseException as e:  # the trainer's loop raises it
                self.error = e
                return

    def put(self, item: Any) -> bool:
        try:
            self.inqueue.put(item, timeout=1.0)
            return True
        except queue.Full:
            return False

    def take_outputs(self) -> List[Any]:
        out = []
        while True:
            try:
                out.append(self.outqueue.get_nowait())
            except queue.Empty:
                return out

    def queue_stats(self) -> Dict[str, int]:
        return {"size_now": self.inqueue.qsize(), "capacity": self.inqueue.maxsize}

    def stop(self) -> None:
        if not self.is_alive():
            return
        self._stopped.set()
        try:
            self.inqueue.put_nowait(None)
        except queue.Full:
            pass
        self.join(timeout=10)


__all__ = ["InlineLearner", "LearnerThread"]
