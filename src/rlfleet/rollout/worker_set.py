"""WorkerSet: the local worker plus `num_workers` remote ones (Ray actors).

A remote worker is the same `RolloutWorker` class wrapped with `ray.remote`, nothing more.
Ray is imported and started only when a WorkerSet with remote workers is built (see
`rlfleet.utils.ray_utils.init_ray`).

Remote workers are kept in worker-index order, and everything gathered from them
(samples, metrics, filters) is taken in that order, never in completion order, so a
seeded run repeats exactly.

The class is in parts, one job each: this module (access, calls on every worker,
synchronous sampling, policies, weights, filters, metrics), `worker_membership` (start,
health check, replacement), `worker_requests` (asynchronous requests, helper actors) and
`worker_calls` (what runs on a worker). Ray is called only in these modules,
`placement.py` and `remote_vector_env.py` (and in tune.py).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.rollout.placement import release_group
from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.rollout.sample_counters import ReceivedLedger
from rlfleet.rollout.worker_calls import (
    actor_key,
    env_spaces,
    episodes_only,
    metrics_and_perf,
    replay_policy_changes,
    sample_rounds,
)
from rlfleet.rollout.worker_membership import WorkerMembership
from rlfleet.rollout.worker_requests import AsyncRequests
from rlfleet.utils.filters import FilterManager

logger = logging.getLogger(__name__)


class WorkerSet(WorkerMembership, AsyncRequests):
    """The workers of one trainer (or of its evaluation).

    Args:
        env_creator: `EnvContext -> env` (None: no env).
        policy_class: the Policy subclass.
        trainer_config: the validated config.
        num_workers: remote workers to start (0: sample in this process).
        logdir: the trainer's results folder.
    """

    def __init__(self, *, env_creator, policy_class: type, trainer_config: dict, num_workers: int = 0,
                 logdir: Optional[str] = None):
        self.config = trainer_config
        self.logdir = logdir
        self._env_creator = env_creator
        self._policy_class = policy_class
        self._num_workers = int(num_workers)
        self._remote: List[Any] = []
        self._remote_index: List[int] = []
        # Env steps received per worker index (the driver's side of the chaos benchmark's accounting).
        self.received = ReceivedLedger()
        self._remote_cls = None
        self._ray = None
        self._placement_group = None  # the initial workers' own group (placement_strategy), outside Tune
        self._bundle_of: Dict[int, int] = {}  # worker index -> its bundle in that group
        self._pending_metrics: List[Any] = []
        # `sample()` asks each remote worker for all its rounds in one call where batch sizes
        # are known (False: one call per round, as before).
        self.batched_rounds = True
        # Metrics that came back with the last batched `sample()`: actor key -> (episodes,
        # perf stats). Episodes are kept until `collect_metrics` reports them; while
        # `_folded_fresh`, no worker can have sampled since, so no metrics call is needed.
        self._folded: Dict[Any, Tuple[List[RolloutMetrics], Dict[str, float]]] = {}
        self._folded_fresh = False
        # Asynchronous requests in flight: object ref -> (actor key, worker index).
        self._in_flight: Dict[Any, Tuple[Any, int]] = {}
        self._local: Optional[RolloutWorker] = None
        # add_policy / remove_policy calls, in order, replayed on workers started later.
        self._policy_changes: List[Tuple[str, Dict[str, Any]]] = []

        local_config, local_env_creator = trainer_config, env_creator
        try:
            if num_workers > 0:
                self.add_workers(num_workers)
                self._wait_until_scheduled()
                if not trainer_config.get("create_env_on_driver"):
                    # As RLlib 1.x: the local worker only learns, so it has no env; it
                    # builds its policy from the spaces of a remote worker's env.
                    obs_space, act_space = trainer_config.get("observation_space"), trainer_config.get("action_space")
                    if env_creator is not None and (obs_space is None or act_space is None):
                        env_obs, env_act = self._ray.get(self._remote[0].apply.remote(env_spaces))
                        obs_space, act_space = obs_space or env_obs, act_space or env_act
                        local_config = dict(trainer_config, observation_space=obs_space, action_space=act_space)
                    # An env without one pair of spaces (multi-agent: spaces per policy) is
                    # built on the driver too, only for the local worker to infer them; it
                    # does not sample.
                    if env_creator is None or (obs_space is not None and act_space is not None):
                        local_env_creator = None
                    else:
                        local_config = trainer_config
            self._local = RolloutWorker(
                env_creator=local_env_creator, policy_class=policy_class, config=local_config,
                worker_index=0, num_workers=num_workers, log_dir=logdir,
            )
        except BaseException:
            for handle in self._remote:  # do not leave actors behind
                self._ray.kill(handle)
            release_group(self._ray, self._placement_group)
            raise

    # --- access ------------------------------------------------------------------
    def local_worker(self) -> RolloutWorker:
        return self._local

    def remote_workers(self) -> List[Any]:
        """The remote workers' actor handles, in worker-index order."""
        self._folded_fresh = False  # a caller may sample through the handles
        return list(self._remote)

    def remote_worker_indices(self) -> List[int]:
        """The `worker_index` of each remote worker (a recreated worker keeps its index)."""
        return list(self._remote_index)

    def num_remote_workers(self) -> int:
        return len(self._remote)

    # --- calls on every worker -----------------------------------------------------
    def foreach_worker(self, fn: Callable[[RolloutWorker], Any]) -> list:
        """`fn(worker)` on the local worker, then on each remote worker (in parallel)."""
        self._folded_fresh = False  # `fn` may sample
        out = [fn(self._local)]
        if self._remote:
            out += self._ray.get([w.apply.remote(fn) for w in self._remote])
        return out

    def foreach_worker_with_index(self, fn: Callable[[RolloutWorker, int], Any]) -> list:
        """`fn(worker, worker_index)`: 0 for the local worker, 1.. for the remote ones."""
        self._folded_fresh = False
        out = [fn(self._local, 0)]
        if self._remote:
            out += self._ray.get([w.apply.remote(fn, i) for w, i in zip(self._remote, self._remote_index)])
        return out

    def foreach_env_with_context(self, fn: Callable[[Any, Any], Any]) -> list:
        """`fn(sub_env, env_context)` for every sub-env of every worker; one list per worker."""
        return self.foreach_worker(lambda worker: worker.foreach_env_with_context(fn))

    def foreach_policy(self, fn: Callable) -> list:
        """`fn(policy, policy_id)` for every policy of every worker, flattened."""
        self._folded_fresh = False
        out = list(self._local.foreach_policy(fn))
        if self._remote:
            for results in self._ray.get([w.foreach_policy.remote(fn) for w in self._remote]):
                out.extend(results)
        return out

    # --- sampling ------------------------------------------------------------------
    def sample(self, min_steps: int) -> SampleBatch:
        """Samples until at least `min_steps` env steps are gathered.

        Without remote workers the local worker samples. With remote workers, each round
        asks every remote worker for one batch in parallel; the batches are concatenated in
        worker order, not in the order they arrive, so a seeded run repeats exactly.

        Where every batch has a known size (`batch_mode: truncate_episodes`), the rounds
        needed are known in advance, and each worker is asked for all of its rounds in one
        call (one Ray round trip per worker instead of one per round, no wait for the
        slowest worker after every round); the batches are then put back in the same
        round-by-worker order, so the rows are the same as round by round.
        """
        batches: List[SampleBatch] = []
        steps = 0
        rounds = self._rounds_needed(min_steps)
        if rounds > 0:
            answers = self._ray.get([w.apply.remote(sample_rounds, rounds) for w in self._remote])
            per_worker = [worker_batches for worker_batches, _, _ in answers]
            for handle, (_, episodes, perf) in zip(self._remote, answers):
                key = actor_key(handle)
                self._folded[key] = (self._folded.get(key, ([], {}))[0] + list(episodes), perf)
            self._folded_fresh = True
            for r in range(rounds):
                for index, worker_batches in zip(self._remote_index, per_worker):
                    self.received.record(index, worker_batches[r])
                    steps += worker_batches[r].count
                    batches.append(worker_batches[r])
            expected = int(self.config["rollout_fragment_length"]) * int(self.config["num_envs_per_worker"])
            if any(b.count != expected for b in batches):
                # Sizes not as predicted (e.g. a callback that changes batches): the rows
                # are kept, and later calls go round by round.
                logger.debug("Remote batches are not of %d steps each; sampling round by round from now on",
                             expected)
                self.batched_rounds = False
        while steps < min_steps:  # the rounds left (all of them when the sizes are not known)
            if self._remote:
                self._folded_fresh = False
                round_batches = self._ray.get([w.sample.remote() for w in self._remote])
            else:
                round_batches = [self._local.sample()]
            for index, batch in zip(self._remote_index if self._remote else [0], round_batches):
                self.received.record(index, batch)
                steps += batch.count
                batches.append(batch)
        return SampleBatch.concat_samples(batches)

    def _rounds_needed(self, min_steps: int) -> int:
        """The rounds of one batch per remote worker that reach `min_steps`, when every batch
        has `rollout_fragment_length * num_envs_per_worker` env steps; 0 when unknown (no
        remote workers, complete episodes, a custom or asynchronous sampler, agent steps)."""
        cfg = self.config
        if (not self._remote or not self.batched_rounds or cfg.get("batch_mode") != "truncate_episodes"
                or cfg.get("sample_async") or cfg.get("sample_collector") is not None or cfg.get("fake_sampler")
                or MultiAgentSettings.from_config(cfg).count_agent_steps
                or cfg.get("input", "sampler") != "sampler"):
            return 0
        per_round = int(cfg["rollout_fragment_length"]) * int(cfg["num_envs_per_worker"]) * len(self._remote)
        return -(-int(min_steps) // per_round) if per_round > 0 and min_steps > 0 else 0

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs `num_episodes` whole episodes and returns their metrics (only theirs).

        With remote workers the episodes are shared out (the first workers take one more
        when they do not divide evenly) and run in parallel; else the local worker runs them.
        """
        if not self._remote:
            return episodes_only(self._local, num_episodes)
        self._folded_fresh = False
        n = len(self._remote)
        shares = [num_episodes // n + (i < num_episodes % n) for i in range(n)]
        refs = [w.apply.remote(episodes_only, k) for w, k in zip(self._remote, shares) if k > 0]
        return [episode for episodes in self._ray.get(refs) for episode in episodes]

    # --- policies at run time ---------------------------------------------------------
    def add_policy(self, **kwargs: Any) -> None:
        """`worker.add_policy(**kwargs)` on every worker; replayed on workers started later."""
        self.apply_policy_changes([("add", dict(kwargs))])

    def remove_policy(self, **kwargs: Any) -> None:
        """`worker.remove_policy(**kwargs)` on every worker; replayed on workers started later."""
        self.apply_policy_changes([("remove", dict(kwargs))])

    def policy_changes(self) -> List[Tuple[str, Dict[str, Any]]]:
        """The `("add" | "remove", kwargs)` changes made so far, in order."""
        return list(self._policy_changes)

    def apply_policy_changes(self, changes: List[Tuple[str, Dict[str, Any]]]) -> None:
        """Applies `changes` (as `policy_changes()` lists them) on every worker, and keeps
        them for workers started later."""
        if changes:
            self.foreach_worker(lambda w: replay_policy_changes(w, changes))
            self._policy_changes.extend(changes)

    # --- weights, filters, metrics -------------------------------------------------
    def sync_weights(self, policies: Optional[List[str]] = None, from_worker: Optional[RolloutWorker] = None,
                     global_vars: Optional[dict] = None) -> None:
        """Pushes the weights of `from_worker` (default: the local worker) and the global
        vars to every other worker: one `ray.put`, read by all remote workers.

        The remote calls are not awaited: each actor runs them before its next `sample()`.
        """
        source = from_worker or self._local
        weights = None
        if self._remote:
            weights = source.get_weights(policies)
            ref = self._ray.put(weights)
            for w in self._remote:
                w.set_weights.remote(ref, global_vars)
        if source is not self._local:
            self._local.set_weights(weights if weights is not None else source.get_weights(policies))
        if global_vars:
            self._local.set_global_vars(global_vars)

    def sync_filters(self, filters: Dict[str, Any]) -> None:
        """Makes every worker's filters equal to `filters` (one `ray.put` for all remotes)."""
        self._local.sync_filters(filters)
        if self._remote:
            ref = self._ray.put(filters)
            self._ray.get([w.sync_filters.remote(ref) for w in self._remote])

    def merge_filters(self, update_remote: bool = True) -> None:
        """Merges the remote workers' filter buffers (flushed there) into the local filters,
        in worker order; with `update_remote`, sends the merged filters back (one `ray.put`,
        buffers empty so nothing is counted twice). RLlib 1.x's
        FilterManager (`rllib/utils/filter_manager.py`)."""
        if not self._remote:
            return
        remote_filters = self._ray.get([w.get_filters.remote(flush_after=True) for w in self._remote])
        local_filters = self._local.filters
        FilterManager.synchronize(local_filters, remote_filters, update_remote=False)
        if update_remote:
            copies = {}
            for key, local in local_filters.items():
                copies[key] = local.copy()
                copies[key].clear_buffer()
            ref = self._ray.put(copies)
            self._ray.get([w.sync_filters.remote(ref) for w in self._remote])

    def collect_metrics(self, timeout_s: Optional[float] = None, selected_workers: Optional[List[Any]] = None
                        ) -> Tuple[List[RolloutMetrics], List[Dict[str, float]]]:
        """Finished episodes and sampler perf stats of every worker (or of the remote
        workers `selected_workers` alone) since the last call.

        Remote answers that take longer than `timeout_s` are kept and counted next time
        (`collect_metrics_timeout`).
        """
        if selected_workers is not None:
            return self._remote_metrics([w for w in self._remote if w in selected_workers], timeout_s, [], [])
        episodes = list(self._local.get_metrics())
        # With remote workers the local worker does not sample (even with an env on the
        # driver), so its zeros would only dilute the averages.
        perfs = [self._local.perf_stats()] if self._local.sampler is not None and not self._remote else []
        if not self._remote and not self._pending_metrics:
            return episodes, perfs
        return self._remote_metrics(self._remote, timeout_s, episodes, perfs)

    def _remote_metrics(self, workers: List[Any], timeout_s: Optional[float], episodes: List[RolloutMetrics],
                        perfs: List[Dict[str, float]]) -> Tuple[List[RolloutMetrics], List[Dict[str, float]]]:
        # Per worker (in index order): the metrics that came with its last batched sample()
        # and, unless no worker can have sampled since, a call for the rest.
        folded = [self._folded.pop(actor_key(w), None) for w in workers]
        fresh = self._folded_fresh
        asked = [None if fresh and f is not None else w.apply.remote(metrics_and_perf)
                 for w, f in zip(workers, folded)]
        earlier = self._pending_metrics
        refs = earlier + [r for r in asked if r is not None]
        self._pending_metrics = []
        ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=timeout_s) if refs else ([], [])
        ready_set = set(ready)
        late = [r for r in refs if r not in ready_set]
        done = [r for r in refs if r in ready_set]
        results = dict(zip(done, self._ray.get(done)))
        self._pending_metrics = late
        if late:
            logger.warning("%d remote worker(s) did not report metrics within collect_metrics_timeout=%ss; "
                           "their episodes count in a later iteration", len(late), timeout_s)
        # In list order (late answers of earlier calls first, then workers in index order),
        # not in the order they answered.
        answers = [results[r] for r in earlier if r in results]
        for f, ref in zip(folded, asked):
            if f is not None:
                answers.append((f[0], f[1] if ref is None else None))
            if ref is not None and ref in results:
                answers.append(results[ref])
        for eps, perf in answers:
            episodes.extend(eps)
            if perf is not None:
                perfs.append(perf)
        return episodes, perfs

    def stop(self) -> None:
        """Stops the local worker and every remote worker (and their remote envs); calling
        it again does nothing."""
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        if self._local is not None:
            self._local.stop()
        if not self._remote:
            release_group(self._ray, self._placement_group)
            return
        ray = self._ray
        refs = [w.stop.remote() for w in self._remote]
        ray.wait(refs, num_returns=len(refs), timeout=10)
        for w in self._remote:
            try:
                ray.kill(w)
            except Exception:  # already gone
                pass
        self._remote, self._remote_index, self._pending_metrics = [], [], []
        self._folded, self._folded_fresh = {}, False
        release_group(ray, self._placement_group)
        self._placement_group = None


