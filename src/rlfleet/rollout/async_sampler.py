"""`sample_async`: a background thread samples the next batch while the caller learns.

The thread samples with its own copy of the policy (`sampling_policy`). At each
`next()` call, while the thread is idle, the caller's weights and global timestep are
copied into that copy, and the thread starts the next batch. So:

- the batch `next()` returns was collected with the weights of the previous `next()`
  call: off-policy by exactly one batch, never more (a hand-off slot of size 1, and the
  thread waits for each hand-off before it samples again);
- the learner may change its own policy freely while the thread samples (no torn reads);
- the outcome does not depend on thread timing: a seeded run repeats exactly.

While a batch is being collected the thread holds `lock`; the worker takes it to read or
replace filters and metrics, so those never change under the sampler's feet.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable


class AsyncSampling:
    """Runs `sample_fn` in a daemon thread, one batch ahead of the caller.

    Args:
        sample_fn: collects one batch (the sampler's `sample`).
        sync_fn: copies the caller's weights into the sampling policy; called by `next()`
            while the thread is idle.
        lock: held by the thread while it samples.
    """

    def __init__(self, sample_fn: Callable[[], Any], sync_fn: Callable[[], None], lock: threading.Lock):
        self._sample_fn = sample_fn
        self._sync_fn = sync_fn
        self.lock = lock
        self._ready: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        self._go = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._handed_over = False  # the caller took `lock` for the thread's next batch

    def next(self) -> Any:
        """The batch sampled since the last call (the first call waits for the first batch)."""
        if self._thread is None:
            self._sync_fn()
            self._thread = threading.Thread(target=self._run, name="rlfleet-sample-async", daemon=True)
            self._thread.start()
            self._hand_over()
        item = self._ready.get()
        # The thread is idle now (it waits for `_go`): safe to update its policy copy.
        if not isinstance(item, BaseException):
            self._sync_fn()
            self._hand_over()
            return item
        raise RuntimeError("The sample_async background thread failed") from item

    def _hand_over(self) -> None:
        # The lock is taken here and released by the thread once its batch is done: whatever
        # the caller does next (read filters or metrics) waits for that batch. Had the thread
        # taken it itself, such a call could slip in before the batch under load, and a
        # seeded run would no longer repeat exactly.
        self.lock.acquire()
        self._handed_over = True
        self._go.set()

    def _run(self) -> None:
        while True:
            self._go.wait()
            self._go.clear()
            try:
                if self._stopped.is_set():
                    return
                batch = self._sample_fn()
            except BaseException as e:  # handed to the caller, which raises it
                self._ready.put(e)
                return
            finally:
                if self._handed_over:
                    self._handed_over = False
                    self.lock.release()
            self._ready.put(batch)

    def stop(self) -> None:
        self._stopped.set()
        self._go.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
