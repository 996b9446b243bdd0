"""Ape-X DQN (Horgan et al. 2018): many workers explore with fixed epsilons of their own
and add n-step transitions, prioritized on the worker, straight to replay shards; a learner
thread learns on batches replayed from the shards and sends the new priorities back.

With remote workers the shards are Ray actors (`num_replay_buffer_shards`), started by
`WorkerSet.start_actors`. With `num_workers: 0` they live in this process and the loop is
synchronous (sample a fragment, add it to the next shard, learn `training_intensity`), the
same shards and worker-side code without Ray.
"""
from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any, Dict, List, Optional

from rlfleet.algorithms.apex.replay_shard import ReplayShard, learn_replayed, worker_side_transitions
from rlfleet.algorithms.async_learner import LearnerLock
from rlfleet.algorithms.dqn.dqn import ALGO_KEYS as DQN_KEYS
from rlfleet.algorithms.dqn.dqn import DQNTrainer
from rlfleet.config import ConfigKey, InvalidValue, algorithm_config, boolean, int_at_least, with_defaults

K = ConfigKey

# Ape-X's own keys; shared with APEX_DDPG.
APEX_KEYS: List[ConfigKey] = [
    K("num_replay_buffer_shards", 4, "Replay shards (Ray actors with remote workers); each holds "
      "buffer_size / shards transitions and replays once it has learning_starts / shards (the reference's "
      "optimizer.num_replay_buffer_shards is taken too).", int_at_least(1)),
    K("max_weight_sync_delay", 400, "A worker gets the learner's newest weights after sampling this many "
      "env steps (the reference's optimizer.max_weight_sync_delay is taken too).", int_at_least(1)),
    K("worker_side_prioritization", True, "Workers compute the initial priorities (|TD error|) of the "
      "transitions they add; False: new transitions get the shard's highest priority so far.", boolean),
    K("learner_queue_size", 16, "Replayed batches waiting for the learner thread at most.", int_at_least(1)),
    K("max_requests_in_flight_per_replay_shard", 2, "Replay requests each shard has queued at once.",
      int_at_least(1)),
    K("max_sample_requests_in_flight_per_worker", 2, "Sample requests each remote worker has queued at once.",
      int_at_least(1)),
]

# The reference's Ape-X defaults on top of DQN's.
APEX_DEFAULTS: Dict[str, Any] = {
    "n_step": 3,
    "num_workers": 32,
    "buffer_size": 2000000,
    "learning_starts": 50000,
    "train_batch_size": 512,
    "rollout_fragment_length": 50,
    "target_network_update_freq": 500000,
    "timesteps_per_iteration": 25000,
    "min_iter_time_s": 30,
    "exploration_config": {"type": "PerWorkerEpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.02,
                           "epsilon_timesteps": 10000},
}

ALGO_KEYS: List[ConfigKey] = with_defaults(
    [k for k in DQN_KEYS if k.name != "worker_side_prioritization"] + APEX_KEYS, APEX_DEFAULTS)

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


# The reference's Ape-X took its replay settings in `optimizer` (the arguments of 1.x's
# AsyncReplayOptimizer); here they are Ape-X's own top-level keys. `debug` added the shards'
# stats to the results, which rlfleet always reports (info/replay_shard_<i>).
REFERENCE_OPTIMIZER_ENTRIES = ("num_replay_buffer_shards", "max_weight_sync_delay", "debug")


def fold_reference_optimizer(config: dict, defaults: dict) -> None:
    """Moves the reference's replay entries of `optimizer` to their top-level keys, in place.

    Args:
        config: a validated config of APEX or APEX_DDPG.
        defaults: the trainer's default config (a top-level key changed from it and set
            differently in `optimizer` is a conflict).

    Raises:
        ValueError: a value an Ape-X key does not take, or two different values for one key.
    """
    options = config.get("optimizer") or {}
    moved = {k: options[k] for k in REFERENCE_OPTIMIZER_ENTRIES if k in options}
    if not moved:
        return
    config["optimizer"] = {k: v for k, v in options.items() if k not in moved}
    if "debug" in moved:
        try:
            boolean(moved.pop("debug"))
        except InvalidValue as e:
            raise ValueError(e.message("optimizer.debug", options["debug"])) from None
    checks = {k.name: k.check for k in APEX_KEYS}
    for key, value in moved.items():
        try:
            value = checks[key](value)
        except InvalidValue as e:
            raise ValueError(e.message(f"optimizer.{key}", value)) from None
        if config[key] != defaults[key] and config[key] != value:
            raise ValueError(f"'optimizer.{key}': {value!r} (the reference's place for it) and '{key}': "
                             f"{config[key]!r} disagree; set only '{key}'")
        config[key] = value


def validate_apex(name: str, config: dict) -> None:
    """Ape-X's cross-key rules (APEX and APEX_DDPG)."""
    if config.get("store_buffer_in_checkpoints"):
        raise ValueError(f"'store_buffer_in_checkpoints': True is not available yet for {name} (its "
                         "replay lives in shards); set it to False")
    if config.get("training_intensity") is not None and config["num_workers"] > 0:
        raise ValueError(f"'training_intensity': {config['training_intensity']} applies only with "
                         "'num_workers': 0; with remote workers the learner replays as fast as it can "
                         "(set it to None)")


class _Learner(threading.Thread):
    """Learns on `(shard index, {policy_id: batch})` items from `inqueue`; puts
    `(shard index, {policy_id: (indexes, priorities)}, infos, rows, target_updated)` on
    `outqueue`. The target networks are refreshed here, between updates, every
    `target_network_update_freq` trained rows."""

    def __init__(self, trainer: "ApexTrainer"):
        super().__init__(daemon=True, name="rlfleet-apex-learner")
        self.trainer, self.lock = trainer, trainer._lock
        self.inqueue: "queue.Queue" = queue.Queue(maxsize=int(trainer.config["learner_queue_size"]))
        self.outqueue: "queue.Queue" = queue.Queue()
        self.error: Optional[BaseException] = None
        self.learn_time_s = 0.0
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                item = self.inqueue.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                return
            try:
                start = time.perf_counter()
                with self.lock:
                    out = self.trainer._learn_on(*item)
                self.learn_time_s += time.perf_counter() - start
                self.outqueue.put(out)
            except BaseException as e:  # the trainer's loop raises it
                self.error = e
                return

    def stop(self) -> None:
        if not self.is_alive():
            return
        self._stopped.set()
        try:
            self.inqueue.put_nowait(None)
        except queue.Full:
            pass
        self.join(timeout=10)


class ApexTrainer(LearnerLock, DQNTrainer):
    """Ape-X DQN: distributed prioritized experience replay."""

    _name = "APEX"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    # What a worker makes of its samples for the shards (a module-level function: it is
    # shipped to the remote workers); APEX_R2D2 stores sequences instead.
    worker_side_items = staticmethod(worker_side_transitions)

    def validate_algorithm_config(self, config: dict) -> None:
        fold_reference_optimizer(config, self._default_config)
        super().validate_algorithm_config(config)
        validate_apex(self._name, config)

    def setup(self, config: dict) -> None:
        super().setup(config)
        # Reentrant, so that state reads inside `learner_paused()` take it again.
        self._lock = threading.RLock()
        n = config["num_replay_buffer_shards"]
        args = [(config, i, config["buffer_size"] // n, self.shard_replay_starts(n)) for i in range(n)]
        self._remote = bool(self.workers.remote_workers())
        if self._remote:
            self.shards = self.workers.start_actors(ReplayShard, args)
        else:
            self.shards = [ReplayShard(*a) for a in args]
        self._add_turn = self._replay_turn = 0  # local adds and replays take the shards in turn
        self._since_sync: Dict[int, int] = collections.defaultdict(int)
        self._replays_in_flight: Dict[Any, int] = {}  # future -> shard index
        self._weights = (-1, None)  # (learner updates, weights handle) of the last weights put
        self._learner_info: Dict[str, Any] = {}
        self._updates = 0  # learner updates so far (the weights' version)
        self._trained_since_target = 0
        self.counters.setdefault("num_weight_syncs", 0)
        self.counters.setdefault("num_samples_dropped", 0)
        self.learner = _Learner(self)
        if self._remote:
            self.learner.start()

    def shard_replay_starts(self, num_shards: int) -> int:
        """Items a shard holds before it replays: its share of `learning_starts`."""
        return self.config["learning_starts"] // num_shards

    # --- what the learner does with one replayed batch (under the lock) ----------------
    def _learn_on(self, shard_index: int, replayed: Dict[str, Any]):
        eps = self.config["prioritized_replay_eps"]
        infos, priorities, rows = {}, {}, 0
        for pid, batch in replayed.items():
            infos[pid], priorities[pid] = learn_replayed(self.get_policy(pid), batch, eps)
            rows = max(rows, self.replayed_steps(batch))
        self._updates += 1
        self._trained_since_target += rows
        target_updated = self._trained_since_target >= self.config["target_network_update_freq"]
        if target_updated:
            for pid in replayed:
                self.get_policy(pid).update_target()
            self._trained_since_target = 0
        return shard_index, priorities, infos, replayed, target_updated

    def _after_learning(self, out) -> None:
        shard_index, priorities, infos, replayed, target_updated = out
        if self.config["prioritized_replay"]:
            if self._remote:
                self.workers.call_actor(self.shards[shard_index], "update_priorities", priorities)
            else:
                self.shards[shard_index].update_priorities(priorities)
        self._learner_info.update(infos)
        self.counters["num_env_steps_trained"] += max(self.replayed_steps(b) for b in replayed.values())
        self.counters["num_agent_steps_trained"] += sum(self.replayed_steps(b) for b in replayed.values())
        if target_updated:
            self.counters["num_target_updates"] += 1
            self.counters["last_target_update_ts"] = self.counters["num_env_steps_trained"]

    def training_step(self) -> Dict[str, Any]:
        return self._remote_step() if self._remote else self._local_step()

    # --- no remote workers: the same shards, in this process, one step at a time ---------
    def _local_step(self) -> Dict[str, Any]:
        cfg = self.config
        local = self.workers.local_worker()
        # === sample one fragment and add it to the next shard ===
        batch = local.sample()
        self.shards[self._add_turn % len(self.shards)].add(self.worker_side_items(local, batch))
        self._add_turn += 1
        self.count_sampled(batch.env_steps(), batch.agent_steps())
        # === replay from the shards in turn, learn, send priorities back ===
        if self.counters["num_env_steps_sampled"] >= cfg["learning_starts"]:
            beta = self.beta_schedule(self.counters["num_env_steps_sampled"])
            for _ in range(self.updates_owed(batch.env_steps())):
                index = self._replay_turn % len(self.shards)
                self._replay_turn += 1
                replayed = self.shards[index].replay(self.replay_batch_items(), beta)
                if replayed is not None:
                    self._after_learning(self._learn_on(index, replayed))
        local.set_global_vars(self._global_vars())
        return dict(self._learner_info)

    # --- remote workers: sampling, replay and learning all run at once -----------------
    def _remote_step(self) -> Dict[str, Any]:
        cfg = self.config
        workers = self.workers
        # === sample: the workers add n-step transitions straight to the shards ===
        workers.sample_async_into(self.worker_side_items, self.shards, "add",
                                  max_in_flight=cfg["max_sample_requests_in_flight_per_worker"])
        for index, (env_steps, agent_steps) in workers.ready_results(timeout_s=0.05):
            self.count_sampled(env_steps, agent_steps)
            # === sync: newest weights to a worker every max_weight_sync_delay of its steps ===
            self._since_sync[index] += env_steps
            if self._since_sync[index] >= cfg["max_weight_sync_delay"]:
                self._since_sync[index] = 0
                self._push_weights(index)
        # === replay: keep requests in flight on every shard, feed the learner thread ===
        if self.counters["num_env_steps_sampled"] >= cfg["learning_starts"]:
            beta = self.beta_schedule(self.counters["num_env_steps_sampled"])
            pending = collections.Counter(self._replays_in_flight.values())
            for i, shard in enumerate(self.shards):
                for _ in range(cfg["max_requests_in_flight_per_replay_shard"] - pending[i]):
                    future = workers.call_actor(shard, "replay", self.replay_batch_items(), beta)
                    self._replays_in_flight[future] = i
            ready, _ = workers.wait_futures(list(self._replays_in_flight), timeout_s=0.0)
            for future in ready:
                i = self._replays_in_flight.pop(future)
                replayed = workers.get_futures([future])[0]
                if replayed is None:
                    continue
                try:
                    self.learner.inqueue.put((i, replayed), timeout=1.0)
                except queue.Full:
                    self.counters["num_samples_dropped"] += 1
        # === priorities: from the learner back to their shards ===
        self._drain_learner()
        return dict(self._learner_info)

    def _push_weights(self, index: int) -> None:
        if self._weights[0] != self._updates:
            with self._lock:
                version, weights = self._updates, self.workers.local_worker().get_weights()
            self._weights = (version, self.workers.put_weights(weights))
        self.workers.push_weights([index], self._weights[1], self._global_vars())
        self.counters["num_weight_syncs"] += 1

    def _drain_learner(self) -> None:
        if self.learner.error is not None:
            raise RuntimeError(f"the learner thread failed: {self.learner.error}") from self.learner.error
        while True:
            try:
                out = self.learner.outqueue.get_nowait()
            except queue.Empty:
                return
            self._after_learning(out)

    # --- results, state, stop ---------------------------------------------------------
    def replay_shard_stats(self) -> List[Dict[str, Any]]:
        """Each shard's `stats()` (sizes, adds, replays, priority updates), in shard order."""
        if self._remote:
            return self.workers.get_futures([self.workers.call_actor(s, "stats") for s in self.shards])
        return [s.stats() for s in self.shards]

    def shard_priorities(self, shard_index: int, policy_id: str = "default_policy"):
        """priority^alpha of each transition of one shard's buffer for `policy_id`."""
        shard = self.shards[shard_index]
        if self._remote:
            return self.workers.get_futures([self.workers.call_actor(shard, "priorities", policy_id)])[0]
        return shard.priorities(policy_id)

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        for i, stats in enumerate(self.replay_shard_stats()):
            result["info"][f"replay_shard_{i}"] = stats
        result["info"]["learner_queue"] = {"size_now": self.learner.inqueue.qsize(),
                                           "capacity": self.learner.inqueue.maxsize}
        result["info"]["learner_time_s"] = self.learner.learn_time_s
        return result

    def _weights_changed(self) -> None:
        self._weights = (-1, None)  # the next sync puts the new weights

    def stop(self) -> None:
        self.learner.stop()
        if self._remote:
            self.workers.kill_actors(self.shards)
        super().stop()
