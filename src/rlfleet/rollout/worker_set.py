"""WorkerSet: the local worker plus `num_workers` remote ones (Ray actors).

A remote worker is the same `RolloutWorker` class wrapped with `ray.remote`, nothing more.
Ray is imported and started only when a WorkerSet with remote workers is built (see
`rlfleet.utils.ray_utils.init_ray`).

Remote workers are kept in worker-index order, and everything gathered from them
(samples, metrics, filters) is taken in that order, never in completion order, so a
seeded run repeats exactly.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.name_registries import NameRegistries
from rlfleet.rollout.placement import bundle_is_placed, bundle_options, release_group, reserve_worker_group
from rlfleet.rollout.policy_mapping import default_policy_mapping_fn
from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.utils.filters import FilterManager
from rlfleet.utils.ray_utils import init_ray, started_here

logger = logging.getLogger(__name__)


# Module-level so that Ray pickles them by reference (a lambda would be shipped per call).
def _env_spaces(worker: RolloutWorker):
    # None where the env has no single pair of spaces (e.g. a multi-agent env).
    return worker.env_spaces()


def _metrics_and_perf(worker: RolloutWorker):
    return worker.get_metrics(), worker.perf_stats()


def _noop(worker: RolloutWorker) -> None:
    return None


def _sample(worker: RolloutWorker) -> SampleBatch:
    return worker.sample()


def _sample_rounds(worker: RolloutWorker, rounds: int
                   ) -> Tuple[List[SampleBatch], List[RolloutMetrics], Dict[str, float]]:
    # Several rounds' batches in one call (one Ray round trip instead of `rounds`), with the
    # metrics `collect_metrics` would otherwise fetch in a call of its own.
    batches = [worker.sample() for _ in range(rounds)]
    return batches, worker.get_metrics(), worker.perf_stats()


def _sample_into(worker: RolloutWorker, process: Callable[[RolloutWorker, Any], Any], actors: List[Any],
                 method: str) -> Tuple[int, int]:
    batch = worker.sample()
    # Each worker takes the actors in turn, starting at its own index (spreads the load).
    turn = getattr(worker, "_sink_turn", worker.worker_index)
    worker._sink_turn = turn + 1
    getattr(actors[turn % len(actors)], method).remote(process(worker, batch))
    return batch.env_steps(), batch.agent_steps()


def _health_probe(worker: RolloutWorker) -> int:
    # As the reference: a worker is healthy if it can still sample (a dead process, or an
    # env that keeps raising, is not).
    return worker.sample().count if worker.sampler is not None else 0


def _episodes_only(worker: RolloutWorker, num_episodes: int) -> List[RolloutMetrics]:
    """`num_episodes` episodes' metrics, and only theirs (the worker's pending ones are
    dropped: evaluation workers report nothing else)."""
    episodes = worker.sample_episodes(num_episodes)
    worker.get_metrics()
    return episodes


def _replay_policy_changes(worker: RolloutWorker, changes: List[Tuple[str, Dict[str, Any]]]) -> None:
    for op, kwargs in changes:
        if op == "add":
            worker.add_policy(**kwargs)
        else:
            worker.remove_policy(**kwargs)


def _adopt_mapping(worker: RolloutWorker, policy_mapping_fn: Optional[Callable],
                   policies_to_train: List[str]) -> None:
    # The list only when it differs: setting it also ends "every policy trains" mode, which
    # a worker that already trains these policies should keep.
    if policy_mapping_fn is not None:
        worker.set_policy_mapping_fn(policy_mapping_fn)
    if list(worker.policies_to_train) != list(policies_to_train):
        worker.set_policies_to_train(policies_to_train)


def _actor_key(handle) -> Any:
    return handle._actor_id.hex()


class WorkerSet:
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
                    # As the reference: the local worker only learns, so it has no env; it
                    # builds its policy from the spaces of a remote worker's env.
                    obs_space, act_space = trainer_config.get("observation_space"), trainer_config.get("action_space")
                    if env_creator is not None and (obs_space is None or act_space is None):
                        env_obs, env_act = self._ray.get(self._remote[0].apply.remote(_env_spaces))
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
            answers = self._ray.get([w.apply.remote(_sample_rounds, rounds) for w in self._remote])
            per_worker = [worker_batches for worker_batches, _, _ in answers]
            for handle, (_, episodes, perf) in zip(self._remote, answers):
                key = _actor_key(handle)
                self._folded[key] = (self._folded.get(key, ([], {}))[0] + list(episodes), perf)
            self._folded_fresh = True
            for r in range(rounds):
                for worker_batches in per_worker:
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
            for batch in round_batches:
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
                or (cfg.get("multiagent") or {}).get("count_steps_by", "env_steps") != "env_steps"
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
            return _episodes_only(self._local, num_episodes)
        self._folded_fresh = False
        n = len(self._remote)
        shares = [num_episodes // n + (i < num_episodes % n) for i in range(n)]
        refs = [w.apply.remote(_episodes_only, k) for w, k in zip(self._remote, shares) if k > 0]
        return [episode for episodes in self._ray.get(refs) for episode in episodes]

    # --- asynchronous requests (IMPALA, APPO, A3C) -------------------------------------
    def submit_async(self, fn: Callable[..., Any], *args: Any, max_in_flight: int = 1) -> List[int]:
        """Asks each remote worker with fewer than `max_in_flight` requests pending to run
        `fn(worker, *args)`, and returns the worker index of each request sent. The answers come back
        through `ready_results()`, in the order they finish. A worker runs its requests one
        after the other, so weights pushed before a request are in use when it runs."""
        self._forget_removed_requests()
        self._folded_fresh = False
        pending: Dict[Any, int] = {}
        for key, _ in self._in_flight.values():
            pending[key] = pending.get(key, 0) + 1
        sent: List[int] = []
        for handle, index in zip(self._remote, self._remote_index):
            key = _actor_key(handle)
            for _ in range(int(max_in_flight) - pending.get(key, 0)):
                self._in_flight[handle.apply.remote(fn, *args)] = (key, index)
                sent.append(index)
        return sent

    def sample_async_requests(self, max_in_flight: int = 1) -> List[int]:
        """`submit_async` of one `sample()` per free slot: keeps up to `max_in_flight`
        sample requests pending on every remote worker."""
        return self.submit_async(_sample, max_in_flight=max_in_flight)

    def ready_results(self, timeout_s: Optional[float] = None) -> List[Tuple[int, Any]]:
        """`(worker_index, answer)` for every request of `submit_async` that has finished,
        waiting up to `timeout_s` (None: forever) for the first one when none has.

        Raises:
            ray.exceptions.RayError: a worker died or raised (its request is dropped; the
                trainer's fault tolerance takes over, see `rlfleet.fault_tolerance`).
        """
        self._forget_removed_requests()
        refs = list(self._in_flight)
        if not refs:
            return []
        ray = self._ray
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        out = []
        for ref in ready:
            _, index = self._in_flight.pop(ref)
            out.append((index, ray.get(ref)))
        return out

    # The name the sampling loops read best with.
    ready_batches = ready_results

    def num_in_flight(self) -> int:
        """Requests of `submit_async` sent and not yet returned by `ready_results`."""
        self._forget_removed_requests()
        return len(self._in_flight)

    def _forget_removed_requests(self) -> None:
        live = {_actor_key(h) for h in self._remote}
        for ref in [r for r, (key, _) in self._in_flight.items() if key not in live]:
            del self._in_flight[ref]

    def push_weights(self, worker_indices: Sequence[int], weights: Any, global_vars: Optional[dict] = None) -> None:
        """Sends `weights` (`local_worker().get_weights()`, or a handle from `put_weights`)
        to the remote workers `worker_indices` only; not awaited (each worker applies them
        before its next request)."""
        targets = set(int(i) for i in worker_indices)
        for handle, index in zip(self._remote, self._remote_index):
            if index in targets:
                handle.set_weights.remote(weights, global_vars)

    def put_weights(self, weights: Dict[str, dict]) -> Any:
        """`weights` in the object store once, for several `push_weights` calls."""
        return self._ray.put(weights) if self._remote else weights

    # --- helper actors (e.g. Ape-X replay shards) ---------------------------------------
    def sample_async_into(self, process: Callable[[RolloutWorker, Any], Any], actors: Sequence[Any],
                          method: str, max_in_flight: int = 1) -> List[int]:
        """`submit_async` of one `sample()` per free slot whose batch goes straight from the
        worker to one of `actors` (taken in turn per worker): the worker calls
        `actor.<method>(process(worker, batch))` and answers `(env_steps, agent_steps)`
        through `ready_results()`."""
        return self.submit_async(_sample_into, process, list(actors), method, max_in_flight=max_in_flight)

    def start_actors(self, cls: type, actor_args: Sequence[tuple], *, num_cpus: float = 0.0,
                     resources: Optional[Dict[str, float]] = None) -> List[Any]:
        """Starts one Ray actor of class `cls` per tuple of constructor arguments in
        `actor_args` (started Ray first if this set has no remote workers) and returns their
        handles; they live until `kill_actors`."""
        if self._ray is None:
            self._ray = init_ray(num_cpus=max(1.0, _cpus_wanted(self.config, self._num_workers)))
        remote_cls = self._ray.remote(cls)
        options: Dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": 0}
        if resources:
            options["resources"] = dict(resources)
        return [remote_cls.options(**options).remote(*args) for args in actor_args]

    def call_actor(self, handle: Any, method: str, *args: Any) -> Any:
        """Calls `handle.<method>(*args)` on an actor of `start_actors`; returns its future
        (see `wait_futures`, `get_futures`), which may be dropped for a call not awaited."""
        return getattr(handle, method).remote(*args)

    def wait_futures(self, futures: Sequence[Any], timeout_s: Optional[float] = 0.0) -> Tuple[List[Any], List[Any]]:
        """`(ready, pending)` of `futures` after waiting up to `timeout_s` for all of them."""
        futures = list(futures)
        if not futures:
            return [], []
        return self._ray.wait(futures, num_returns=len(futures), timeout=timeout_s)

    def get_futures(self, futures: Sequence[Any]) -> List[Any]:
        """The values of `futures` (waits for them)."""
        return self._ray.get(list(futures))

    def kill_actors(self, handles: Sequence[Any]) -> None:
        """Ends the actors of `start_actors` (ones already gone are skipped)."""
        for handle in handles:
            try:
                self._ray.kill(handle)
            except Exception:  # already gone
                pass

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
            self.foreach_worker(lambda w: _replay_policy_changes(w, changes))
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
        buffers empty so nothing is counted twice). The reference's FilterManager."""
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
        folded = [self._folded.pop(_actor_key(w), None) for w in workers]
        fresh = self._folded_fresh
        asked = [None if fresh and f is not None else w.apply.remote(_metrics_and_perf)
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

    # --- membership --------------------------------------------------------------
    def add_workers(self, num_workers: int) -> None:
        """Starts `num_workers` more remote workers (indices after the highest in use)."""
        start = max(self._remote_index, default=0) + 1
        self._add(list(range(start, start + int(num_workers))))

    def _add(self, indices: Sequence[int]) -> List[Any]:
        cfg = self.config
        if self._ray is None:
            self._ray = init_ray(num_cpus=_cpus_wanted(cfg, self._num_workers))
            _check_resources(self._ray, cfg, len(indices))
            # The initial workers start in a group of their own with `placement_strategy`
            # (rollout/placement.py); a replacement takes its predecessor's bundle.
            self._placement_group = reserve_worker_group(self._ray, cfg, len(indices))
            if self._placement_group is not None:
                self._bundle_of = {i: k for k, i in enumerate(indices)}
        ray = self._ray
        placed = [bundle_options(self._placement_group, self._bundle_of[i])
                  if i in self._bundle_of and bundle_is_placed(ray, self._placement_group, self._bundle_of[i])
                  else {} for i in indices]
        if self._remote_cls is None:
            self._remote_cls = ray.remote(RolloutWorker)
        options: Dict[str, Any] = {
            "num_cpus": cfg["num_cpus_per_worker"],
            # _fake_gpus: the workers' "GPUs" are CPU towers; Ray reserves none.
            "num_gpus": 0 if cfg.get("_fake_gpus") else cfg["num_gpus_per_worker"],
            "max_restarts": 0,  # failures are handled by the trainer (ignore/recreate)
        }
        if cfg.get("custom_resources_per_worker"):
            options["resources"] = dict(cfg["custom_resources_per_worker"])
        env_vars = {str(k): str(v) for k, v in (cfg.get("extra_python_environs_for_worker") or {}).items()}
        if env_vars:
            # Set before the worker process imports anything (e.g. OMP_NUM_THREADS).
            options["runtime_env"] = {"env_vars": env_vars}
        config_ref = ray.put(cfg)
        names = NameRegistries.capture()  # names registered on the driver resolve on the workers too
        new = [
            self._remote_cls.options(**options, **placement).remote(
                env_creator=self._env_creator, policy_class=self._policy_class, config=config_ref,
                worker_index=i, num_workers=self._num_workers, log_dir=self.logdir, name_registries=names,
            )
            for i, placement in zip(indices, placed)
        ]
        for handle, index in zip(new, indices):
            self._remote.append(handle)
            self._remote_index.append(index)
        order = sorted(range(len(self._remote)), key=lambda k: self._remote_index[k])
        self._remote = [self._remote[k] for k in order]
        self._remote_index = [self._remote_index[k] for k in order]
        return new

    def _wait_until_scheduled(self, warn_after_s: float = 30.0) -> None:
        """Waits for the remote workers to start; says why when that takes long (most often
        the cluster lacks the CPUs/GPUs/custom resources they ask for)."""
        ray = self._ray
        refs = [w.apply.remote(_noop) for w in self._remote]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=warn_after_s)
        if pending:
            cfg = self.config
            logger.warning(
                "%d of %d remote workers have not started after %.0fs. Each asks for num_cpus_per_worker=%s, "
                "num_gpus_per_worker=%s, custom_resources_per_worker=%s; the cluster has %s available. Waiting.",
                len(pending), len(refs), warn_after_s, cfg["num_cpus_per_worker"], cfg["num_gpus_per_worker"],
                cfg.get("custom_resources_per_worker") or {}, ray.available_resources())
        ray.get(refs)

    def reset(self, healthy_workers: List[Any]) -> None:
        """Keeps only `healthy_workers` (actor handles) as the remote workers."""
        keep = {_actor_key(h) for h in healthy_workers}
        pairs = [(h, i) for h, i in zip(self._remote, self._remote_index) if _actor_key(h) in keep]
        self._remote = [h for h, _ in pairs]
        self._remote_index = [i for _, i in pairs]
        self._pending_metrics = []
        self._folded = {key: value for key, value in self._folded.items() if key in keep}

    def remove_unhealthy_workers(self) -> List[int]:
        """Health-checks every remote worker (one `sample()` each, in parallel), kills and
        drops the ones that fail, and returns their worker indices."""
        if not self._remote:
            return []
        ray = self._ray
        self._folded_fresh = False  # the probe samples
        checks = [w.apply.remote(_health_probe) for w in self._remote]
        healthy, failed = [], []
        for handle, index, ref in zip(self._remote, self._remote_index, checks):
            try:
                ray.get(ref)
                healthy.append(handle)
            except ray.exceptions.RayError as e:
                logger.warning("Removing unhealthy remote worker %d: %s", index, str(e).splitlines()[0])
                failed.append(index)
                try:
                    ray.kill(handle)
                except Exception:  # already gone
                    pass
        self.reset(healthy)
        return failed

    def recreate_workers(self, indices: Sequence[int], from_worker: Optional[RolloutWorker] = None,
                         global_vars: Optional[dict] = None) -> None:
        """Starts replacements for the workers `indices` (same worker index, so the same seeds).

        Each gets this set's policies as they are now (the run-time `add_policy` /
        `remove_policy` calls replayed), the local worker's policy mapping and policies to
        train (also when they were set on the workers directly), and the weights and filters
        of `from_worker` (default: the local worker).
        """
        new = self._add(list(indices))
        if self._placement_group is not None:
            new = self._restart_if_died(new, list(indices))
        from_worker = from_worker or self._local
        changes, local = self.policy_changes(), self._local
        if changes:
            self._ray.get([w.apply.remote(_replay_policy_changes, changes) for w in new])
        # A mapping set on the workers directly (not through the config or a policy change)
        # reaches the new workers too; one they already have is not sent again, so that a
        # one-policy worker keeps its fast sampler.
        mapping_fn = None if local.policy_mapping_fn is self._mapping_after(changes) else local.policy_mapping_fn
        self._ray.get([w.apply.remote(_adopt_mapping, mapping_fn, list(local.policies_to_train)) for w in new])
        weights = self._ray.put(from_worker.get_weights())
        filters = self._ray.put(from_worker.get_filters())
        self._ray.get([w.set_weights.remote(weights, global_vars) for w in new]
                      + [w.sync_filters.remote(filters) for w in new])

    def _restart_if_died(self, new: List[Any], indices: List[int]) -> List[Any]:
        """Waits for replacements to start. One put in its predecessor's bundle may die with
        the node that bundle was on, when Ray had not noticed the node's death yet; it is then
        started once more (in the bundle rescheduled elsewhere, else outside the group)."""
        try:
            self._ray.get([w.apply.remote(_noop) for w in new])
            return new
        except self._ray.exceptions.RayActorError:
            logger.warning("A replacement worker died on start (its placement-group bundle was on a node that "
                           "died); starting it again")
        dead = {_actor_key(h) for h in new}
        self.kill_actors(new)
        self.reset([h for h in self._remote if _actor_key(h) not in dead])
        return self._add(indices)

    def _mapping_after(self, changes: List[Tuple[str, Dict[str, Any]]]) -> Callable:
        """The mapping a new worker has once `changes` are replayed on it."""
        mapping_fn = (self.config.get("multiagent") or {}).get("policy_mapping_fn") or default_policy_mapping_fn
        for _, kwargs in changes:
            mapping_fn = kwargs.get("policy_mapping_fn") or mapping_fn
        return mapping_fn

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


def _cpus_wanted(config: dict, num_workers: int) -> float:
    """Logical CPUs the remote workers of this trainer ask for (incl. evaluation workers)."""
    cpus = num_workers * float(config["num_cpus_per_worker"])
    if not config.get("in_evaluation"):
        eval_cfg = config.get("evaluation_config") or {}
        cpus += int(config.get("evaluation_num_workers") or 0) * float(
            eval_cfg.get("num_cpus_per_worker", config["num_cpus_per_worker"]))
    return cpus


def _check_resources(ray, config: dict, num_workers: int) -> None:
    """GPUs and custom resources the workers ask for must exist, else actors wait forever."""
    wanted = {"GPU": 0.0 if config.get("_fake_gpus") else num_workers * float(config["num_gpus_per_worker"])}
    for name, amount in (config.get("custom_resources_per_worker") or {}).items():
        wanted[name] = num_workers * float(amount)
    have = ray.cluster_resources()
    for name, amount in wanted.items():
        if amount > 0 and have.get(name, 0) < amount:
            key = "num_gpus_per_worker" if name == "GPU" else "custom_resources_per_worker"
            message = (f"'{key}' asks for {amount:g} {name} in total for {num_workers} remote workers, but the "
                       f"Ray cluster has {have.get(name, 0):g}")
            if started_here():
                fake = " or set '_fake_gpus': True to simulate GPUs on the CPU," if name == "GPU" else ""
                raise ValueError(message + " (a local Ray started by rlfleet: set RAY_ADDRESS to a cluster "
                                           f"that has them,{fake} or lower the request)")
            logger.warning("%s; the workers wait until the cluster provides them (e.g. an autoscaler).", message)
