"""Ray, imported and started only when something remote is asked for.

`import rlfleet` never imports Ray. The first remote worker, remote env or evaluation
worker calls `init_ray()`, which:

- reuses a Ray the user already initialised;
- joins the cluster named by its `address` argument, else by `RAY_ADDRESS`, when one is set;
- else starts a local Ray of its own (`address="local"`) that exposes nothing on the network:
  it binds 127.0.0.1 and runs no dashboard. Plain `ray.init()` would join the latest Ray that
  `ray start` started on this machine (https://docs.ray.io/en/latest/ray-core/starting-ray.html);
  rlfleet never does that by accident.

It logs which Ray it used; `ray_in_use()` says it in words for error messages.
"""
from __future__ import annotations

import logging
import math
import os
import sys
from typing import Any, Optional

logger = logging.getLogger(__name__)

# Set before Ray is first imported (Ray reads it at import time); on Linux it is the
# default anyway. A value the user set is kept.
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

# Whether rlfleet started the running Ray itself (then it knows the resources are fixed).
_started_here = False
# Which Ray `init_ray` used, in words (see `ray_in_use`).
_in_use = "no Ray (not started yet)"


def import_ray():
    """Imports Ray (an optional dependency: `pip install 'rlfleet[ray]'`)."""
    if "ray" not in sys.modules:
        os.environ.setdefault(_LOOPBACK_ENV, "0")
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "Remote workers, remote envs and evaluation workers need Ray: pip install 'rlfleet[ray]' "
            "(or set num_workers, evaluation_num_workers and remote_worker_envs back to their defaults)"
        ) from e
    return ray


def init_ray(num_cpus: Optional[float] = None, address: Optional[str] = None):
    """Returns the `ray` module with Ray running (see the module docstring for which Ray).

    Args:
        num_cpus: logical CPUs the caller's actors ask for; a local Ray started here gets at
            least this many (more than the machine's cores oversubscribes them, with a warning).
        address: a Ray cluster to join (as `ray.init(address=...)`); None: `RAY_ADDRESS`, else
            a local Ray of our own.
    """
    global _started_here, _in_use
    ray = import_ray()
    if ray.is_initialized():
        if not _started_here:
            _in_use = "the Ray that was already initialised in this process"
        return ray
    source = "address" if address else "RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        _in_use = f"the Ray cluster at {address!r} (from {source})"
        logger.info("Ray: joining %s", _in_use)
        ray.init(address=address)
        return ray
    cores = os.cpu_count() or 1
    want = cores if num_cpus is None else max(cores, int(math.ceil(num_cpus)))
    if want > cores:
        logger.warning("The remote workers ask for %s CPUs but this machine has %d cores; starting a local "
                       "Ray with %d logical CPUs (they will share the cores)", num_cpus, cores, want)
    # address="local": a new Ray of our own, even when another job's Ray runs on this machine.
    ray.init(address="local", num_cpus=want, include_dashboard=False, _node_ip_address="127.0.0.1")
    _started_here = True
    _in_use = (f"a local Ray started by rlfleet ({want} logical CPUs, 127.0.0.1 only; set RAY_ADDRESS to join "
               "a cluster instead)")
    logger.info("Ray: using %s", _in_use)
    return ray


def ray_in_use() -> str:
    """Which Ray `init_ray` used, in words (for logs and error messages)."""
    return _in_use


def started_here() -> bool:
    """Whether the running Ray is a local one that `init_ray` started (fixed resources)."""
    return _started_here


def is_worker_failure(error: BaseException) -> bool:
    """Whether `error` comes from a remote worker (its process died, or it raised).

    An env that raises (or breaks its contract) in a remote worker arrives as a
    `RayTaskError` around the sampler's `rlfleet.env.EnvError`, so it counts; that
    worker's sampler then refuses to sample, so the health check drops or recreates it.
    """
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    exceptions: Any = getattr(ray, "exceptions", None)
    return exceptions is not None and isinstance(error, exceptions.RayError)
