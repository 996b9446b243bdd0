"""The learner thread of IMPALA and APPO (Espeholt et al. 2018): it takes train batches off a
queue, through a minibatch buffer that lets each be learned on `num_sgd_iter` times, and
learns on them while the trainer's loop goes on sampling."""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple


class MinibatchBuffer:
    """Hands out train batches from `inqueue`, each `num_passes` times, cycling through up to
    `size` of them (as RLlib 1.x's `MinibatchBuffer`)."""

    def __init__(self, inqueue: "queue.Queue", size: int, timeout: float, num_passes: int):
        self.inqueue, self.timeout, self.num_passes = inqueue, timeout, int(num_passes)
        self.buffers: List[Any] = [None] * int(size)
        self.ttl = [0] * int(size)
        self.idx = 0
        self.first_pass = False

    def get(self) -> Tuple[Any, bool]:
        """`(item, released)`: released is True on the item's last pass (`first_pass`
        says whether it was the item's first).

        Raises:
            queue.Empty: nothing came within `timeout` seconds.
        """
        if self.ttl[self.idx] <= 0:
            self.buffers[self.idx] = self.inqueue.get(timeout=self.timeout)
            self.ttl[self.idx] = self.num_passes
        self.ttl[self.idx] -= 1
        self.first_pass = self.ttl[self.idx] == self.num_passes - 1
        item, released = self.buffers[self.idx], self.ttl[self.idx] <= 0
        if released:
            self.buffers[self.idx] = None
        self.idx = (self.idx + 1) % len(self.buffers)
        return item, released



class LearnerThread(threading.Thread):
    """Learns on the train batches put on `inqueue` as `(batch, weights_version)` or
    `(batch, weights_version, fresh_env_steps)`; puts `(env_steps, agent_steps, policy lag,
    info, fresh env steps learned on for the first time)` on `outqueue` after each update.

    Args:
        learn: `train batch -> {policy_id: learner info}` (called under `lock`).
        config: reads `learner_queue_size`, `learner_queue_timeout`, `minibatch_buffer_size`,
            `num_sgd_iter`.
        lock: held during each update; whoever reads or sets the weights takes it too.
    """

    def __init__(self, learn: Callable[[Any], Dict[str, Any]], config: dict, lock: threading.Lock):
        super().__init__(daemon=True, name="rlfleet-learner")
        self.learn, self.lock = learn, lock
        self.inqueue: "queue.Queue" = queue.Queue(maxsize=int(config["learner_queue_size"]))
        self.outqueue: "queue.Queue" = queue.Queue()
        self.timeout = float(config["learner_queue_timeout"])
        self.minibatch_buffer = MinibatchBuffer(self.inqueue, config["minibatch_buffer_size"], self.timeout,
                                                config["num_sgd_iter"])
        self.version = 0  # updates so far: the weights' version
        self.updates_reported = 0  # updates whose results are on outqueue
        self.error: Optional[BaseException] = None
        self.updated = threading.Condition()  # notified after each update (and on failure)
        self.queue_sizes: List[int] = []
        self.learn_time_s = 0.0
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.step()
            except queue.Empty:
                self._fail(RuntimeError(
                    f"The learner got no train batch for {self.timeout:g} s ('learner_queue_timeout'); the workers "
                    "stopped delivering samples. Check the workers, or raise 'learner_queue_timeout'."))
                return
            except BaseException as e:  # reported to the trainer's loop, which raises it
                self._fail(e)
                return

    def _fail(self, error: BaseException) -> None:
        with self.updated:
            self.error = error
            self.updated.notify_all()

    def step(self) -> None:
        self.queue_sizes.append(self.inqueue.qsize())
        (batch, sampled_version, *fresh), _ = self.minibatch_buffer.get()
        if batch is None:  # stop() wakes the thread with a None
            return
        fresh = (fresh[0] if fresh else batch.env_steps()) if self.minibatch_buffer.first_pass else 0
        start = time.perf_counter()
        with self.lock:
            info = self.learn(batch)
            lag = self.version - sampled_version
            self.version += 1
            # Under the lock: whoever reads the weights under it sees this update reported.
            self.outqueue.put((batch.env_steps(), batch.agent_steps(), lag, info, fresh))
        self.learn_time_s += time.perf_counter() - start
        with self.updated:
            self.updates_reported += 1
            self.updated.notify_all()

    def wait_for_update(self, after: int, timeout: float) -> bool:
        """Waits up to `timeout` s until more than `after` updates are on `outqueue` (or the
        thread failed); True when they are."""
        with self.updated:
            return self.updated.wait_for(lambda: self.updates_reported > after or self.error is not None, timeout)

    def stop(self) -> None:
        self._stopped.set()
        try:
            self.inqueue.put_nowait((None, 0))
        except queue.Full:
            pass
        self.join(timeout=10)


__all__ = ["LearnerThread", "MinibatchBuffer"]
