"""Ape-X DQN (Horgan et al. 2018): many workers explore with fixed epsilons of their own
and add n-step transitions, prioritized on the worker, straight to replay shards; a learner
thread learns on batches replayed from the shards and sends the new priorities back.

One loop runs both wirings, chosen in `setup` (`rlfleet.rollout.worker_pools`): with remote
workers the shards are Ray actors (`num_replay_buffer_shards`) and a learner thread learns
while the loop samples and replays; with `num_workers: 0` the shards live in this process, the
trainer's own worker samples one fragment per step and the learner learns inline, paced by
`training_intensity` (apex/learners.py).
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Dict, Iterator, List

from rlfleet.algorithms.apex.learners import InlineLearner, LearnerThread
from rlfleet.algorithms.apex.replay_shard import ReplayShard, learn_replayed, worker_side_transitions
from rlfleet.algorithms.common.learner_lock import LearnerLock
from rlfleet.algorithms.dqn.dqn import ALGO_KEYS as DQN_KEYS
from rlfleet.algorithms.dqn.dqn import DQNTrainer
from rlfleet.config import ConfigKey, InvalidValue, algorithm_config, boolean, int_at_least, with_defaults
from rlfleet.rollout.worker_calls import sample_into
from rlfleet.rollout.worker_pools import worker_pool

K = ConfigKey

# Ape-X's own keys; shared with APEX_DDPG.
APEX_KEYS: List[ConfigKey] = [
    K("num_replay_buffer_shards", 4, "Replay shards (Ray actors with remote workers); each holds "
      "buffer_size / shards transitions and replays once it has learning_starts / shards (RLlib 1.x's "
      "optimizer.num_replay_buffer_shards is taken too).", int_at_least(1)),
    K("max_weight_sync_delay", 400, "A worker gets the learner's newest weights after sampling this many "
      "env steps (RLlib 1.x's optimizer.max_weight_sync_delay is taken too).", int_at_least(1)),
    K("worker_side_prioritization", True, "Workers compute the initial priorities (|TD error|) of the "
      "transitions they add; False: new transitions get the shard's highest priority so far.", boolean),
    K("learner_queue_size", 16, "Replayed batches waiting for the learner thread at most.", int_at_least(1)),
    K("max_requests_in_flight_per_replay_shard", 2, "Replay requests each shard has queued at once.",
      int_at_least(1)),
    K("max_sample_requests_in_flight_per_worker", 2, "Sample requests each remote worker has queued at once.",
      int_at_least(1)),
]

# RLlib 1.x's Ape-X defaults on top of DQN's (`rllib/agents/dqn/apex.py`).
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


# RLlib 1.x's Ape-X took its replay settings in `optimizer` (the arguments of 1.x's
# AsyncReplayOptimizer); here they are Ape-X's own top-level keys. `debug` added the shards'
# stats to the results, which rlfleet always reports (info/replay_shard_<i>).
REFERENCE_OPTIMIZER_ENTRIES = ("num_replay_buffer_shards", "max_weight_sync_delay", "debug")


def fold_reference_optimizer(config: dict, defaults: dict) -> None:
    """Moves RLlib 1.x's replay entries of `optimizer` to their top-level keys, in place.

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
            raise ValueError(f"'optimizer.{key}': {value!r} (RLlib 1.x's place for it) and '{key}': "
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


class ApexTrainer(LearnerLock, DQNTrainer):
    """Ape-X DQN: distributed prioritized experience replay."""

    _name = "APEX"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    # What a worker makes of its samples for the shards (a module-level function: it is
    # shipped to the remote workers); APEX_R2D2 stores sequences instead.
    worker_side_items = staticmethod(worker_side_transitions)
    # The sample ledger (rollout/sample_counters.py): a worker answers after its batch went to
    # a shard, so what the driver hears of is stored (Ape-X's "trained"; rows evicted unreplayed
    # count as stored, not lost).
    records_own_training = True

    def validate_algorithm_config(self, config: dict) -> None:
        fold_reference_optimizer(config, self._default_config)
        super().validate_algorithm_config(config)
        validate_apex(self._name, config)

    def setup(self, config: dict) -> None:
        super().setup(config)
        # Reentrant, so that state reads inside `learner_paused()` take it again.
        self._lock = threading.RLock()
        # === wiring: in this process or on Ray, chosen here once ===
        self.pool = worker_pool(self.workers, self._lock)
        n = config["num_replay_buffer_shards"]
        args = [(config, i, config["buffer_size"] // n, self.shard_replay_starts(n)) for i in range(n)]
        self.shards = self.pool.start_actors(ReplayShard, args)
        self._shard_handles = self.pool.as_handles(self.shards)  # as the workers' add calls reach them
        learner_class = InlineLearner if self.pool.in_process else LearnerThread
        self.learner = learner_class(lambda item: self._learn_on(*item), self._lock, config["learner_queue_size"])
        # Replays asked for per step: paced by `training_intensity` when the learner learns
        # inline (each one learned before the next is asked for, so a shard replays with the
        # priorities of its last batch), else as many as the shards have room for.
        self._replay_requests = self._paced_requests if self.pool.in_process else self._free_slot_requests
        self._replay_turn = 0  # paced replays take the shards in turn
        self._since_sync: Dict[int, int] = collections.defaultdict(int)
        self._replays_in_flight: Dict[Any, int] = {}  # future -> shard index
        self._weights = (-1, None)  # (learner updates, weights handle) of the last weights put
        self._learner_info: Dict[str, Any] = {}
        self._updates = 0  # learner updates so far (the weights' version)
        self._trained_since_target = 0
        self.counters.setdefault("num_weight_syncs", 0)
        self.counters.setdefault("num_samples_dropped", 0)

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
            self.pool.call(self.shards[shard_index], "update_priorities", priorities)
        self._learner_info.update(infos)
        self.counters["num_env_steps_trained"] += max(self.replayed_steps(b) for b in replayed.values())
        self.counters["num_agent_steps_trained"] += sum(self.replayed_steps(b) for b in replayed.values())
        if target_updated:
            self.counters["num_target_updates"] += 1
            self.counters["last_target_update_ts"] = self.counters["num_env_steps_trained"]

    # --- the loop: the same with in-process shards and with Ray actors -----------------
    def training_step(self) -> Dict[str, Any]:
        cfg, pool = self.config, self.pool
        # === sample: the workers add n-step transitions straight to the shards ===
        pool.submit(sample_into, self.worker_side_items, self._shard_handles, "add",
                    max_in_flight=cfg["max_sample_requests_in_flight_per_worker"])
        sampled = 0
        for index, (env_steps, agent_steps) in pool.ready_results(timeout_s=0.05):
            self.count_sampled(env_steps, agent_steps)
            self.workers.received.record_steps(index, env_steps)
            self.workers.received.record_trained(env_steps)
            sampled += env_steps
            # === sync: newest weights to a worker every max_weight_sync_delay of its steps ===
            self._since_sync[index] += env_steps
            if self._since_sync[index] >= cfg["max_weight_sync_delay"]:
                self._since_sync[index] = 0
                if pool.sync_worker(index, self._weights_handle, self._global_vars()):
                    self.counters["num_weight_syncs"] += 1
        # === replay and learn; priorities go back to the shard replayed from ===
        if self.counters["num_env_steps_sampled"] >= cfg["learning_starts"]:
            beta = self.beta_schedule(self.counters["num_env_steps_sampled"])
            for index in self._replay_requests(sampled):
                self._replays_in_flight[pool.call(self.shards[index], "replay", self.replay_batch_items(), beta)] = index
                self._feed_learner()
        self._feed_learner()
        pool.share_global_vars(self._global_vars())
        return dict(self._learner_info)

    def _paced_requests(self, sampled: int) -> Iterator[int]:
        for _ in range(self.updates_owed(sampled)):
            self._replay_turn += 1
            yield (self._replay_turn - 1) % len(self.shards)

    def _free_slot_requests(self, sampled: int) -> Iterator[int]:
        pending = collections.Counter(self._replays_in_flight.values())
        for i in range(len(self.shards)):
            for _ in range(self.config["max_requests_in_flight_per_replay_shard"] - pending[i]):
                yield i

    def _feed_learner(self) -> None:
        """Replays that have arrived go to the learner; what it learned goes back."""
        if self._replays_in_flight:
            ready, _ = self.pool.wait(list(self._replays_in_flight), timeout_s=0.0)
            for future in ready:
                i = self._replays_in_flight.pop(future)
                replayed = self.pool.get([future])[0]
                if replayed is not None and not self.learner.put((i, replayed)):
                    self.counters["num_samples_dropped"] += 1
        self.learner.raise_error()
        for out in self.learner.take_outputs():
            self._after_learning(out)

    def _weights_handle(self) -> Any:
        if self._weights[0] != self._updates:
            with self._lock:
                version, weights = self._updates, self.workers.local_worker().get_weights()
            self._weights = (version, self.pool.put(weights))
        return self._weights[1]

    # --- results, state, stop ---------------------------------------------------------
    def replay_shard_stats(self) -> List[Dict[str, Any]]:
        """Each shard's `stats()` (sizes, adds, replays, priority updates), in shard order."""
        return self.pool.get([self.pool.call(s, "stats") for s in self.shards])

    def shard_priorities(self, shard_index: int, policy_id: str = "default_policy"):
        """priority^alpha of each transition of one shard's buffer for `policy_id`."""
        return self.pool.get([self.pool.call(self.shards[shard_index], "priorities", policy_id)])[0]

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        for i, stats in enumerate(self.replay_shard_stats()):
            result["info"][f"replay_shard_{i}"] = stats
        result["info"]["learner_queue"] = self.learner.queue_stats()
        result["info"]["learner_time_s"] = self.learner.learn_time_s
        return result

    def _weights_changed(self) -> None:
        self._weights = (-1, None)  # the next sync puts the new weights

    def stop(self) -> None:
        self.learner.stop()
        self.pool.kill_actors(self.shards)
        super().stop()
