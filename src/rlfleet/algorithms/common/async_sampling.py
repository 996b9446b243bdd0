"""The asynchronous data flow of IMPALA and APPO (Espeholt et al. 2018).

Workers sample all the time (up to `max_sample_requests_in_flight_per_worker` requests
each); the trainer's loop gathers whatever batches have arrived, mixes in replayed ones
(`replay_proportion`), packs them into train batches and puts them on the learner's queue
(`learner_queue_size`: when it is full the loop waits, so sampling never runs away from
learning). A learner thread (common/learner_thread.py) takes train batches off the queue and
learns; a worker gets the learner's newest weights after every `broadcast_interval` of its
batches, so it samples with weights a little behind the learner's: the policy lag, which
V-trace corrects for.

One loop runs both wirings, chosen in `setup` (`rlfleet.rollout.worker_pools`). With
`num_workers: 0` the trainer's own worker samples, one fragment per loop, taking turns with
the learner thread (they share one model): after queueing a train batch the loop waits for
the learner's next update, so that a busy loop cannot starve the thread of the lock.
"""
from __future__ import annotations

import collections
import logging
import queue
import threading
from typing import Any, Deque, Dict, List, Tuple

import numpy as np

from rlfleet.algorithms.common.learner_lock import LearnerLock
from rlfleet.algorithms.common.learner_thread import LearnerThread
from rlfleet.algorithms.common.mix_in_replay import MixInReplay
from rlfleet.config import ConfigKey, int_at_least, number_above, number_in
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.worker_calls import sample_once
from rlfleet.rollout.worker_pools import worker_pool
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



def _multi(batch: Any) -> MultiAgentBatch:
    return batch if isinstance(batch, MultiAgentBatch) else batch.as_multi_agent()


class AsyncSamplingTrainer(LearnerLock, Trainer):
    """A trainer with IMPALA's data flow; subclasses set the policy and keys and may override
    `learn_on_policy_batch`."""

    # The sample ledger (rollout/sample_counters.py): received when a batch arrives, trained
    # when the learner has learned on it once (replayed copies are not fresh samples).
    records_own_training = True

    def setup(self, config: dict) -> None:
        # Reentrant, so that state reads inside `learner_paused()` take it again.
        self._lock = threading.RLock()
        self.learner = LearnerThread(self._learn, config, self._lock)
        self.learner.start()
        # === wiring: in this process or on Ray, chosen here once ===
        self.pool = worker_pool(self.workers, self._lock)
        self._replay = MixInReplay(config["replay_buffer_num_slots"], config["replay_proportion"],
                                   np.random.default_rng(config.get("seed")))
        # (sample batch, weights version, fresh env steps: 0 for a replayed copy) waiting for a train batch
        self._pending: List[Tuple[Any, int, int]] = []
        self._enqueued_fresh = 0  # fresh env steps put on the learner queue so far
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
        cfg, pool = self.config, self.pool
        # === sample: the batches the workers have finished ===
        for index in pool.submit(sample_once, max_in_flight=cfg["max_sample_requests_in_flight_per_worker"]):
            self._request_versions[index].append(self._acting_version(index))
        arrived = [(i, b, self._pop_version(i)) for i, b in pool.ready_results(timeout_s=1.0)]
        # === queue train batches for the learner ===
        for index, batch, version in arrived:
            self.count_sampled(batch.env_steps(), batch.agent_steps())
            self.workers.received.record(index, batch)
            for n, part in enumerate(self._replay.add_and_replay(batch)):  # the new batch first
                self._pending.append((part, version, part.env_steps() if n == 0 else 0))
                self._pending_steps += part.env_steps()
            if self._pending_steps >= cfg["train_batch_size"]:
                reported = self.learner.updates_reported
                self._enqueue(SampleBatch.concat_samples([b for b, _, _ in self._pending])
                              if all(isinstance(b, SampleBatch) for b, _, _ in self._pending)
                              else MultiAgentBatch.concat_samples([_multi(b) for b, _, _ in self._pending]),
                              min(v for _, v, _ in self._pending), sum(f for _, _, f in self._pending))
                self._pending, self._pending_steps = [], 0
                if pool.in_process:  # the worker acts with the learner's model: they take turns
                    self._wait_for_learner(reported)
            # === sync: the learner's newest weights to this worker, every broadcast_interval ===
            self._since_broadcast[index] += 1
            if self._since_broadcast[index] >= cfg["broadcast_interval"]:
                self._since_broadcast[index] = 0
                if pool.sync_worker(index, self._weights_handle, self._global_vars()):
                    self._pushed_version[index] = self._weights_ref[0]
        self._drain_learner()
        return self._learner_info

    def _acting_version(self, index: int) -> int:
        # The weights' version worker `index` samples with: an in-process worker acts with the
        # learner's own model, a remote one with the weights last pushed to it.
        return self.learner.version if self.pool.in_process else self._pushed_version[index]

    def _pop_version(self, index: int) -> int:
        versions = self._request_versions[index]
        return versions.popleft() if versions else self._acting_version(index)

    def _enqueue(self, train_batch: Any, version: int, fresh: int) -> None:
        # Waits while the queue is full (back pressure), but not on a learner that died.
        while True:
            self._raise_learner_error()
            try:
                self.learner.inqueue.put((train_batch, version, fresh), timeout=1.0)
                self._enqueued_fresh += fresh
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

    def _weights_handle(self) -> Any:
        if self._weights_ref[0] != self.learner.version:
            with self._lock:
                version = self.learner.version
                weights = self.workers.local_worker().get_weights()
            self._weights_ref = (version, self.pool.put(weights))
        return self._weights_ref[1]

    def _drain_learner(self) -> None:
        self._raise_learner_error()
        self._take_learner_outputs()
        self.pool.share_global_vars(self._global_vars())

    def _take_learner_outputs(self) -> None:
        while True:
            try:
                env_steps, agent_steps, lag, info, fresh = self.learner.outqueue.get_nowait()
            except queue.Empty:
                break
            self.workers.received.record_trained(fresh)
            self.counters["num_env_steps_trained"] += env_steps
            self.counters["num_agent_steps_trained"] += agent_steps
            self._trained_this_iter += env_steps
            self._lags.append(lag)
            self._learner_info = info

    def samples_queued(self) -> int:
        # Waiting for a train batch, plus put on the learner queue and not learned on yet
        # (the learner reports each update under the lock, so under it this is exact).
        with self._lock:
            self._take_learner_outputs()
            learner_side = self._enqueued_fresh - self.workers.received.trained + self.workers.received.trained_at_restore
            return sum(f for _, _, f in self._pending) + learner_side

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
        with self._lock:
            while True:  # updates made before the restore: not in the restored books
                try:
                    self.learner.outqueue.get_nowait()
                except queue.Empty:
                    break
            super().set_state(state)
            # Batches sampled before the restore are not learned on (the restored ledger
            # starts from the checkpoint's books, so they are not in it).
            self._pending, self._pending_steps = [], 0
            while True:
                try:
                    self.learner.inqueue.get_nowait()
                except queue.Empty:
                    break
            self._enqueued_fresh = 0
            self.workers.received.trained_at_restore = self.workers.received.trained

    def stop(self) -> None:
        self.learner.stop()
        super().stop()


__all__ = ["ASYNC_KEYS", "AsyncSamplingTrainer"]
