"""The resources a trainer asks for (one bundle for the driver, one per remote worker, one
per evaluation worker, the bundles RLlib 1.x's `Trainer.default_resource_request` asks Tune for), and the driver's
own settings (`configure_driver`).

Tune reserves a trainer's request as one placement group; `Trainer.default_resource_request`
returns it for a config.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from rlfleet.config.rllib2_names import rename_rllib2_keys


@dataclass
class ResourceRequest:
    """The resources one trainer asks for: one bundle for the driver (the trainer process
    and its local worker), one per remote worker, one per evaluation worker.

    Attributes:
        bundles: `{"CPU": n, "GPU": n, <custom resource>: n}` per bundle; bundle 0 is the driver.
        strategy: the placement-group strategy (`placement_strategy`: PACK, SPREAD, ...).
    """

    bundles: List[Dict[str, float]] = field(default_factory=list)
    strategy: str = "PACK"

    def required_resources(self) -> Dict[str, float]:
        """The bundles summed per resource."""
        total: Dict[str, float] = {}
        for bundle in self.bundles:
            for name, amount in bundle.items():
                total[name] = total.get(name, 0) + amount
        return total


def default_resource_request(default_config: dict, config: Optional[dict]) -> ResourceRequest:
    """The resources a trainer with `default_config` needs when given `config`.

    Bundle 0 is the driver (`num_cpus_for_driver`, `num_gpus`), then one bundle per remote
    worker (`num_cpus_per_worker`, `num_gpus_per_worker`, `custom_resources_per_worker`),
    then one per evaluation worker (the evaluation config's per-worker resources) when
    evaluation is on.

    Args:
        default_config: the algorithm's `DEFAULT_CONFIG`.
        config: a (partial) config; missing keys take the defaults.
    """
    cf = dict(default_config, **rename_rllib2_keys(config or {}))  # RLlib 2.x's names too
    eval_cf = cf.get("evaluation_config") or {}
    fake = bool(cf.get("_fake_gpus"))  # simulated GPUs are CPU towers: nothing to reserve

    def worker_bundle(c: dict) -> Dict[str, float]:
        bundle = {"CPU": c.get("num_cpus_per_worker", cf["num_cpus_per_worker"]),
                  "GPU": 0 if fake else c.get("num_gpus_per_worker", cf["num_gpus_per_worker"])}
        bundle.update(c.get("custom_resources_per_worker", cf.get("custom_resources_per_worker")) or {})
        return bundle

    bundles = [{"CPU": cf["num_cpus_for_driver"], "GPU": 0 if fake else cf["num_gpus"]}]
    bundles += [worker_bundle(cf) for _ in range(int(cf["num_workers"]))]
    # Evaluation workers exist when evaluation is on (evaluation workers alone turn it on:
    # validate_config sets evaluation_interval to 1 then).
    n_eval = int(cf.get("evaluation_num_workers") or 0)
    if cf.get("evaluation_interval") or n_eval:
        bundles += [worker_bundle(eval_cf) for _ in range(n_eval)]
    return ResourceRequest(bundles=bundles, strategy=cf.get("placement_strategy") or "PACK")


# Variables that size torch's CPU thread pool. Torch reads them once, when it is imported,
# which for a trainer has already happened (`import rlfleet.trainer` imports torch); so
# `configure_driver` applies them to the running torch as well.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_torch_threads(num_cpus: float) -> None:
    """Caps torch's intra-op threads at the CPUs the driver was given (`num_cpus_for_driver`).

    The nets RL trains are small: extra threads buy nothing on an idle machine (PPO on
    CartPole takes the same time with 1 or 2) and cost 10-20x on a loaded one, where
    they wait on each other. An explicit `OMP_NUM_THREADS` wins, as Ray's does for
    remote workers.
    """
    if "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    torch.set_num_threads(max(1, int(math.ceil(num_cpus))))


def apply_driver_environs(environs: Dict[str, object]) -> None:
    """Sets `extra_python_environs_for_driver` in this process's environment.

    A thread-count variable (`OMP_NUM_THREADS`, `MKL_NUM_THREADS`) among them also sets
    torch's intra-op threads, since torch read the environment when it was imported.

    Raises:
        ValueError: naming the key, for a thread count that is not an int >= 1.
    """
    threads = []
    for key, value in (environs or {}).items():
        os.environ[str(key)] = str(value)
        if key in _THREAD_VARIABLES:
            try:
                threads.append(int(str(value).strip()))
            except ValueError:
                threads.append(0)
            if threads[-1] < 1:
                raise ValueError(f"'extra_python_environs_for_driver': {key}={value!r} must be an int >= 1")
    if threads:
        import torch

        torch.set_num_threads(min(threads))


def configure_driver(config: dict) -> None:
    """Sets up the trainer's own process as the config asks: `extra_python_environs_for_driver`
    (thread counts reach the already imported torch too), torch threads for
    `num_cpus_for_driver` (unless `OMP_NUM_THREADS` is set), and `log_level` for rlfleet's
    loggers."""
    apply_driver_environs(config.get("extra_python_environs_for_driver") or {})
    limit_torch_threads(config["num_cpus_for_driver"])
    if config.get("log_level"):
        level = config["log_level"]
        logging.getLogger("rlfleet").setLevel("WARNING" if level == "WARN" else level)


__all__ = ["ResourceRequest", "apply_driver_environs", "configure_driver", "default_resource_request", "limit_torch_threads"]
