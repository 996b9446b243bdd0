"""The asynchronous data flow of IMPALA and APPO (Espeholt et al. 2018).

Workers sample all the time (up to `max_sample_requests_in_flight_per_worker` requests
each); the trainer's loop gathers whatever batches have arrived, mixes in replayed ones
(`replay_proportion`), packs them into train batches and puts them on the learner's queue
(`learner_queue_size`: when it is full the loop waits, so sampling never runs away from
learning). A learner thread takes train batches off the queue (through a minibatch buffer
that lets each be learned on `num_sgd_iter` times) and learns; a worker gets the learner's
newest weights after every `broadcast_interval` of its batches, so it samples with weights a
little behind the learner's: the policy lag, which V-trace corrects for.

With `num_workers: 0` the trainer's own worker samples, one fragment per loop, taking turns
with the learner thread (they share one model): after queueing a train batch the loop waits
for the learner's next update, so that a busy loop cannot starve the thread of the lock.
Every Ray call stays in `WorkerSet`.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import queue
import threading
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

import numpy as np

from rlfleet.config import ConfigKey, int_at_least, number_above, number_in
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.trainer import Trainer

logger = logging.getLogger(__name__)

K = ConfigKey

# The keys of the asynchronous data flow (IMPALA's defaults; APPO changes a few).
ASYNC_KEYS: List[ConfigKey] = [
    K("minibatch_buffer_size", 1, "Train batches the learner cycles through, each learned on num_sgd_iter times "
      "before it is replaced by a new one from the queue.", int_at_least(1)),
    K("num_sgd_iter", 1, "Times the learner learns on each train batch (see minibatch_buffer_size).",
      int_at_least(1)),
    K("replay_proportion", 0.0, "Replayed batches per new batch, on average (0: no replay).", number_in(0)),
    K("replay_buffer_num_slots", 0, "Sample batches kept for replay (needed by replay_proportion > 0).",
      int_at_least(0)),
    K("learner_queue_size", 16, "Train batches waiting for the learner at most; sampling waits when it is full.",
      int_at_least(1)),
    K("learner_queue_timeout", 300, "Seconds the learner waits for a train batch before train() fails "
      "(the workers stopped delivering).", number_above(0)),
    K("max_sample_requests_in_flight_per_worker", 2, "Sample requests each remote worker has queued at once.",
      int_at_least(1)),
    K("broadcast_interval", 1, "A worker gets the learner's newest weights after this many of its batches.",
      int_at_least(1)),
]


class MinibatchBuffer:
    """Hands out train batches from `inqueue`, each `num_passes` times, cycling through up to
    `size` of them (the reference's minibatch buffer)."""

    def __init__(self, inqueue: "queue.Queue", size: int, timeout: float, num_passes: int):
        self.inqueue, self.timeout, self.num_passes = inqueue, timeout, int(num_passes)
        self.buffers: List[Any] = [None] * int(size)
        self.ttl = [0] * int(size)
        self.idx = 0

    def get(self) -> Tuple[Any, bool]:
        """`(item, released)`: released is True on the item's last pass.

        Raises:
            queue.Empty: nothing came within `timeout` seconds.
        """
        if self.ttl[self.idx] <= 0:
            self.buffers[self.idx] = self.inqueue.get(timeout=self.timeout)
            self.ttl[self.idx] = self.num_passes
        self.ttl[self.idx] -= 1
        item, released = self.buffers[self.idx], self.ttl[self.idx] <= 0
        if released:
            self.buffers[self.idx] = None
        self.idx = (self.idx + 1) % len(self.buffers)
        return item, released


class MixInReplay:
    """Keeps the last `num_slots` sample batches and, for each new one, returns it plus on
    average `replay_proportion` batches drawn uniformly from the kept ones."""

    def __init__(self, num_slots: int, replay_proportion: float, rng: np.random.Generator):
        self.slots: List[Any] = []
        self.num_slots, self.proportion, self.rng = int(num_slots), float(replay_proportion), rng
        self.next = 0

    def add_and_replay(self, batch: Any) -> List[Any]:
        out = [batch]
        if self.num_slots <= 0 or self.proportion <= 0:
            return out
        k = int(self.proportion) + int(self.rng.random() < self.proportion - int(self.proportion))
        if self.slots:
            out += [self.slots[i] for i in self.rng.integers(0, len(self.slots), size=k)]
        if len(self.slots) < self.num_slots:
            self.slots.append(batch)
        else:
            self.slots[self.next] = batch
            self.next = (self.next + 1) % self.num_slots
        return out


class LearnerThread(threading.Thread):
    """Learns on the train batches put on `inqueue` as `(batch, weights_version)`.

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
        (batch, sampled_version), _ = self.minibatch_buffer.get()
        if batch is None:  # stop() wakes the thread with a None
            return
        start = time.perf_counter()
        with self.lock:
            info = self.learn(batch)
            lag = self.version - sampled_version
            self.version += 1
        self.learn_time_s += time.perf_counter() - start
        self.outqueue.put((batch.env_steps(), batch.agent_steps(), lag, info))
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


def _multi(batch: Any) -> MultiAgentBatch:
    return batch if isinstance(batch, MultiAgentBatch) else batch.as_multi_agent()


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


class AsyncSamplingTrainer(LearnerLock, Trainer):
    """A trainer with IMPALA's data flow; subclasses set the policy and keys and may override
    `learn_on_policy_batch`."""

    def setup(self, config: dict) -> None:
        # Reentrant, so that state reads inside `learner_paused()` take it again.
        self._lock = threading.RLock()
        self.learner = LearnerThread(self._learn, config, self._lock)
        self.learner.start()
        self._replay = MixInReplay(config["replay_buffer_num_slots"], config["replay_proportion"],
                                   np.random.default_rng(config.get("seed")))
        self._pending: List[Tuple[Any, int]] = []  # (sample batch, weights version) waiting for a train batch
        self._pending_steps = 0
        self._request_versions: Dict[int, Deque[int]] = collections.defaultdict(collections.deque)
        self._since_broadcast: Dict[int, int] = collections.defaultdict(int)
        self._weights_ref: Tuple[int, Any] = (-1, None)  # (version, handle) of the last weights put
        self._pushed_version: Dict[int, int] = collections.defaultdict(int)  # per worker index
        self._learner_info: Dict[str, Any] = {}
        self._lags: List[int] = []
        self._trained_this_iter = 0
        self._learn_time_at_iter = 0.0

    def validate_algorithm_config(self, config: dict) -> None:
        if config["replay_proportion"] > 0 and config["replay_buffer_num_slots"] <= 0:
            raise ValueError(f"'replay_proportion': {config['replay_proportion']} needs 'replay_buffer_num_slots' "
                             "> 0 (the batches to replay from); set it, e.g. to 100, or set 'replay_proportion': 0")

    # --- what the learner thread does with one train batch -----------------------------
    def _learn(self, batch: Any) -> Dict[str, Any]:
        multi = _multi(batch)
        to_train = set(self.workers.local_worker().policies_to_train)
        return {pid: self.learn_on_policy_batch(self.get_policy(pid), policy_batch)
                for pid, policy_batch in multi.policy_batches.items() if pid in to_train and policy_batch.count > 0}

    def learn_on_policy_batch(self, policy, batch: SampleBatch) -> Dict[str, Any]:
        """One update of `policy` on its part of a train batch (default: `learn_on_batch`)."""
        return policy.learn_on_batch(batch)

    # --- the loop -------------------------------------------------------------------
    def training_step(self) -> Dict[str, Any]:
        cfg = self.config
        # === sample: the batches the workers have finished (or one local fragment) ===
        if self.workers.remote_workers():
            for index in self.workers.sample_async_requests(cfg["max_sample_requests_in_flight_per_worker"]):
                self._request_versions[index].append(self._pushed_version[index])
            arrived = self.workers.ready_batches(timeout_s=1.0)
            arrived = [(i, b, self._pop_version(i)) for i, b in arrived]
        else:
            # The local worker acts with the learner's own model (a torch model keeps its last
            # forward pass's values), so the two take turns.
            with self._lock:
                arrived = [(0, self.workers.local_worker().sample(), self.learner.version)]
        # === queue train batches for the learner ===
        for index, batch, version in arrived:
            self.count_sampled(batch.env_steps(), batch.agent_steps())
            for part in self._replay.add_and_replay(batch):
                self._pending.append((part, version))
                self._pending_steps += part.env_steps()
            if self._pending_steps >= cfg["train_batch_size"]:
                reported = self.learner.updates_reported
                self._enqueue(SampleBatch.concat_samples([b for b, _ in self._pending])
                              if all(isinstance(b, SampleBatch) for b, _ in self._pending)
                              else MultiAgentBatch.concat_samples([_multi(b) for b, _ in self._pending]),
                              min(v for _, v in self._pending))
                self._pending, self._pending_steps = [], 0
                if not self.workers.remote_workers():
                    self._wait_for_learner(reported)
            # === sync: the learner's newest weights to this worker, every broadcast_interval ===
            if self.workers.remote_workers():
                self._since_broadcast[index] += 1
                if self._since_broadcast[index] >= cfg["broadcast_interval"]:
                    self._since_broadcast[index] = 0
                    self._broadcast_to(index)
        self._drain_learner()
        return self._learner_info

    def _pop_version(self, index: int) -> int:
        versions = self._request_versions[index]
        return versions.popleft() if versions else self._pushed_version[index]

    def _enqueue(self, train_batch: Any, version: int) -> None:
        # Waits while the queue is full (back pressure), but not on a learner that died.
        while True:
            self._raise_learner_error()
            try:
                self.learner.inqueue.put((train_batch, version), timeout=1.0)
                return
            except queue.Full:
                self._drain_learner()

    def _wait_for_learner(self, reported: int) -> None:
        # A fragment takes the lock again within microseconds of releasing it, and a lock is
        # not fair: without this wait the learner thread could miss its turn for many loops.
        while not self.learner.wait_for_update(reported, timeout=1.0):
            self._raise_learner_error()
            if not self.learner.is_alive():
                return
        self._raise_learner_error()

    def _broadcast_to(self, index: int) -> None:
        version = self.learner.version
        if self._weights_ref[0] != version:
            with self._lock:
                version = self.learner.version
                weights = self.workers.local_worker().get_weights()
            self._weights_ref = (version, self.workers.put_weights(weights))
        self.workers.push_weights([index], self._weights_ref[1], self._global_vars())
        self._pushed_version[index] = self._weights_ref[0]

    def _drain_learner(self) -> None:
        self._raise_learner_error()
        while True:
            try:
                env_steps, agent_steps, lag, info = self.learner.outqueue.get_nowait()
            except queue.Empty:
                break
            self.counters["num_env_steps_trained"] += env_steps
            self.counters["num_agent_steps_trained"] += agent_steps
            self._trained_this_iter += env_steps
            self._lags.append(lag)
            self._learner_info = info
        if not self.workers.remote_workers():  # the local worker acts with the learner's policy
            self.workers.local_worker().set_global_vars(self._global_vars())

    def _raise_learner_error(self) -> None:
        if self.learner.error is not None:
            raise RuntimeError(f"the learner thread failed: {self.learner.error}") from self.learner.error

    # --- results, recovery, state ------------------------------------------------------
    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        sizes, lags = self.learner.queue_sizes, self._lags
        learn_time = self.learner.learn_time_s - self._learn_time_at_iter
        result["info"].update(
            learner_queue={"size_count": len(sizes), "size_mean": float(np.mean(sizes)) if sizes else 0.0,
                           "size_max": int(max(sizes)) if sizes else 0, "capacity": self.learner.inqueue.maxsize,
                           "size_now": self.learner.inqueue.qsize()},
            policy_lag={"mean": float(np.mean(lags)) if lags else 0.0, "max": int(max(lags)) if lags else 0,
                        "batches": len(lags)},
            learner_throughput=self._trained_this_iter / learn_time if learn_time > 0 else 0.0,
            learner_time_s=learn_time,
            num_weight_versions=self.learner.version,
        )
        self.learner.queue_sizes, self._lags, self._trained_this_iter = [], [], 0
        self._learn_time_at_iter = self.learner.learn_time_s
        return result

    def _try_recover(self) -> None:
        with self._lock:
            super()._try_recover()
        # Requests of failed workers are gone; their versions would misalign the new ones.
        self._request_versions.clear()

    def _weights_changed(self) -> None:
        self._weights_ref = (-1, None)  # the next broadcast puts the new weights

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        # Batches sampled before the restore are not learned on.
        self._pending, self._pending_steps = [], 0
        while True:
            try:
                self.learner.inqueue.get_nowait()
            except queue.Empty:
                break

    def stop(self) -> None:
        self.learner.stop()
        super().stop()


__all__ = ["ASYNC_KEYS", "AsyncSamplingTrainer", "LearnerLock", "LearnerThread", "MinibatchBuffer", "MixInReplay"]
