"""Where a trainer's remote workers run: a placement group of their own, outside Tune.

Under Tune the trainer already runs in a placement group built from
`Trainer.default_resource_request` (its `placement_strategy` included) that captures child
actors, so the workers land in it by themselves. A plain trainer (`PPOTrainer(...)`, `rlfleet
train`) has no such group; `reserve_worker_group` reserves one bundle per remote worker
(`num_cpus_per_worker`, `num_gpus_per_worker`, `custom_resources_per_worker`) with
`placement_strategy`, and `WorkerSet` starts worker k in bundle k:

- "PACK" / "SPREAD": as few nodes as fit / as many nodes as there are (best effort);
- "STRICT_PACK" / "STRICT_SPREAD": all on one node / each on its own node, or not at all.

No bundle is reserved for the trainer's own process here: it is running already.
A replacement of a failed worker takes its predecessor's bundle once Ray has rescheduled
it (a bundle of a node that died moves to another node that has room, as the strategy
allows); when that does not happen within 10 s, the replacement starts outside the group.

Owned by `WorkerSet` (the only caller): Ray is called only there, in the modules it owns
here in rollout/, and in tune.py.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional

from rlfleet.utils.ray_utils import started_here

logger = logging.getLogger(__name__)


def worker_bundle(config: dict) -> Dict[str, float]:
    """One remote worker's resources as a placement-group bundle (zero amounts left out)."""
    # _fake_gpus: the workers' "GPUs" are CPU towers, Ray reserves none.
    gpus = 0.0 if config.get("_fake_gpus") else float(config["num_gpus_per_worker"])
    bundle = {"CPU": float(config["num_cpus_per_worker"]), "GPU": gpus}
    bundle.update({str(k): float(v) for k, v in (config.get("custom_resources_per_worker") or {}).items()})
    return {name: amount for name, amount in bundle.items() if amount > 0}


def reserve_worker_group(ray: Any, config: dict, num_workers: int, timeout_s: float = 30.0) -> Optional[Any]:
    """Reserves a placement group of `num_workers` worker bundles with `placement_strategy`.

    Args:
        ray: the `ray` module, initialised.
        config: the trainer's config.
        num_workers: the remote workers to place.
        timeout_s: how long to wait for the cluster to grant the group before saying why.

    Returns:
        The placement group, or None when there is nothing to place or the trainer already
        runs inside a placement group (Tune's), whose strategy then applies.

    Raises:
        ValueError: naming `placement_strategy` and the fix: "STRICT_SPREAD" with more workers
            than nodes (at once), or a group a local Ray started by rlfleet cannot grant within
            `timeout_s` (e.g. "STRICT_PACK" with more workers than one node holds).
    """
    from ray.util.placement_group import get_current_placement_group, placement_group

    bundle = worker_bundle(config)
    if num_workers <= 0 or not bundle or get_current_placement_group() is not None:
        return None
    if ray.get_runtime_context().get_placement_group_id() is not None:
        return None  # the trainer runs in a group of its own (Tune's): its bundles hold the workers' resources
    strategy = config.get("placement_strategy") or "PACK"
    num_nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    if strategy == "STRICT_SPREAD" and num_workers > num_nodes:
        raise ValueError(f"'placement_strategy': 'STRICT_SPREAD' puts each of the {num_workers} remote workers on a "
                         f"node of its own, but the Ray cluster has {num_nodes} node(s); use 'SPREAD' (best effort), "
                         "lower 'num_workers', or add nodes")
    group = placement_group([dict(bundle) for _ in range(int(num_workers))], strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        message = (f"'placement_strategy': {strategy!r} cannot place {num_workers} remote workers of {bundle} "
                   f"each on this Ray cluster (nodes: {nodes}) within {timeout_s:g} s; use 'PACK' or 'SPREAD' "
                   "(best effort), lower 'num_workers' or the per-worker resources, or add nodes")
        if started_here():  # a local Ray rlfleet started: its resources never grow
            ray.util.remove_placement_group(group)
            raise ValueError(message)
        logger.warning("%s. Waiting (e.g. for an autoscaler).", message)
        ray.get(group.ready())
    return group


def bundle_options(group: Optional[Any], bundle_index: int) -> Dict[str, Any]:
    """Actor options that start an actor in bundle `bundle_index` of `group` (none without one)."""
    if group is None:
        return {}
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
        placement_group=group, placement_group_bundle_index=int(bundle_index),
        placement_group_capture_child_tasks=False)}


def bundle_is_placed(ray: Any, group: Optional[Any], bundle_index: int, timeout_s: float = 10.0) -> bool:
    """Whether bundle `bundle_index` of `group` sits on a live node with the group fully
    placed, waiting up to `timeout_s` while Ray reschedules the bundles of a node that died
    (a replacement worker then takes its predecessor's bundle)."""
    if group is None:
        return False

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            table = ray.util.placement_group_table(group)
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        except Exception:  # the group is gone
            return False
        if table.get("state") == "CREATED" and table.get("bundles_to_node_id", {}).get(bundle_index) in alive:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def release_group(ray: Any, group: Optional[Any]) -> None:
    """Removes a group of `reserve_worker_group` (its workers are stopped first)."""
    if group is None:
        return
    try:
        ray.util.remove_placement_group(group)
        # Removal is asynchronous; wait (briefly) so that a trainer built next finds the
        # resources free again.
        deadline = time.monotonic() + 5.0
        while ray.util.placement_group_table(group).get("state") != "REMOVED" and time.monotonic() < deadline:
            time.sleep(0.05)
    except Exception:  # Ray already shut down, or the group is gone
        pass


__all__: List[str] = ["bundle_options", "bundle_is_placed", "release_group", "reserve_worker_group", "worker_bundle"]
