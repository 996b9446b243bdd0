"""`WorkerSet`'s membership: starting remote workers (resources checked, placement group
reserved), dropping unhealthy ones and recreating them with the set's current policies,
weights and filters.

A part of `WorkerSet` (a base class of it, in its own module for size); it uses the set's
state (`_remote`, `_remote_index`, `_ray`, `_placement_group`, ...) that `WorkerSet.__init__`
sets up, and its `policy_changes()` and `kill_actors()`.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.rollout.name_registries import NameRegistries
from rlfleet.rollout.placement import bundle_is_placed, bundle_options, reserve_worker_group
from rlfleet.rollout.policy_mapping import default_policy_mapping_fn
from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.rollout.worker_calls import (actor_key, adopt_mapping, health_probe, noop, persist_sample_count,
                                          replay_policy_changes)
from rlfleet.utils.ray_utils import init_ray, started_here

logger = logging.getLogger(__name__)


class WorkerMembership:
    """Which remote workers a `WorkerSet` has, and their start, health check and replacement."""

    def add_workers(self, num_workers: int) -> None:
        """Starts `num_workers` more remote workers (indices after the highest in use)."""
        start = max(self._remote_index, default=0) + 1
        self._add(list(range(start, start + int(num_workers))))

    def _add(self, indices: Sequence[int]) -> List[Any]:
        cfg = self.config
        if self._ray is None:
            self._ray = init_ray(num_cpus=cpus_wanted(cfg, self._num_workers))
            check_resources(self._ray, cfg, len(indices))
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
        if self.sample_ledger_dir:  # each worker's count outlives it (rollout/sample_counters.py)
            # After the workers joined the set: one that dies here is found by the next health
            # check, and none is left running outside the set.
            ray.get([w.apply.remote(persist_sample_count, self.sample_ledger_dir) for w in new])
        return new

    def _wait_until_scheduled(self, warn_after_s: float = 30.0) -> None:
        """Waits for the remote workers to start; says why when that takes long (most often
        the cluster lacks the CPUs/GPUs/custom resources they ask for)."""
        ray = self._ray
        refs = [w.apply.remote(noop) for w in self._remote]
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
        keep = {actor_key(h) for h in healthy_workers}
        pairs = [(h, i) for h, i in zip(self._remote, self._remote_index) if actor_key(h) in keep]
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
        checks = [w.apply.remote(health_probe) for w in self._remote]
        healthy, failed = [], []
        for handle, index, ref in zip(self._remote, self._remote_index, checks):
            try:
                # The probe's batch is sampled and thrown away: received, then dropped.
                probed = int(ray.get(ref))
                self.received.record_steps(index, probed)
                self.received.record_dropped("health_probe", probed)
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
            self._ray.get([w.apply.remote(replay_policy_changes, changes) for w in new])
        # A mapping set on the workers directly (not through the config or a policy change)
        # reaches the new workers too; one they already have is not sent again, so that a
        # one-policy worker keeps its fast sampler.
        mapping_fn = None if local.policy_mapping_fn is self._mapping_after(changes) else local.policy_mapping_fn
        self._ray.get([w.apply.remote(adopt_mapping, mapping_fn, list(local.policies_to_train)) for w in new])
        weights = self._ray.put(from_worker.get_weights())
        filters = self._ray.put(from_worker.get_filters())
        self._ray.get([w.set_weights.remote(weights, global_vars) for w in new]
                      + [w.sync_filters.remote(filters) for w in new])

    def _restart_if_died(self, new: List[Any], indices: List[int]) -> List[Any]:
        """Waits for replacements to start. One put in its predecessor's bundle may die with
        the node that bundle was on, when Ray had not noticed the node's death yet; it is then
        started once more (in the bundle rescheduled elsewhere, else outside the group)."""
        try:
            self._ray.get([w.apply.remote(noop) for w in new])
            return new
        except self._ray.exceptions.RayActorError:
            logger.warning("A replacement worker died on start (its placement-group bundle was on a node that "
                           "died); starting it again")
        dead = {actor_key(h) for h in new}
        self.kill_actors(new)
        self.reset([h for h in self._remote if actor_key(h) not in dead])
        return self._add(indices)

    def _mapping_after(self, changes: List[Tuple[str, Dict[str, Any]]]) -> Callable:
        """The mapping a new worker has once `changes` are replayed on it."""
        mapping_fn = MultiAgentSettings.from_config(self.config).policy_mapping_fn or default_policy_mapping_fn
        for _, kwargs in changes:
            mapping_fn = kwargs.get("policy_mapping_fn") or mapping_fn
        return mapping_fn


def cpus_wanted(config: dict, num_workers: int) -> float:
    """Logical CPUs the remote workers of this trainer ask for (incl. evaluation workers)."""
    cpus = num_workers * float(config["num_cpus_per_worker"])
    if not config.get("in_evaluation"):
        eval_cfg = config.get("evaluation_config") or {}
        cpus += int(config.get("evaluation_num_workers") or 0) * float(
            eval_cfg.get("num_cpus_per_worker", config["num_cpus_per_worker"]))
    return cpus


def check_resources(ray, config: dict, num_workers: int) -> None:
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
