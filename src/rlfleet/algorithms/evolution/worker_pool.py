"""Hands rollout tasks to the perturbation workers and gathers their answers; the only
place ES and ARS call Ray. It calls Ray itself, beside the WorkerSet, because these workers
are no RolloutWorkers: they score perturbations of a flat vector read from a shared noise
table and answer with returns, where a RolloutWorker samples batches for a policy.

`num_workers: 0` runs the tasks in this process, one after the other. With N remote
workers, the noise table is put into the object store once (every worker maps that one
copy), each round's `theta` and filter state once (one `ray.put`, many readers), and every
idle worker gets the next task as soon as it answers. A worker that dies (or raises) loses
nothing: its task, with the same directions, goes to a replacement
(`recreate_failed_workers`) or to the remaining workers (`ignore_worker_failures`); with
neither set, `WorkerFailureError` is raised, as for the rollout workers.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional

import numpy as np

from rlfleet.algorithms.evolution.flat_policy import FlatLayout
from rlfleet.algorithms.evolution.rollouts import PerturbationWorker, RolloutResult, RolloutTask
from rlfleet.trainer.fault_tolerance import WorkerFailureError
from rlfleet.rollout.worker_membership import cpus_wanted
from rlfleet.utils.ray_utils import init_ray, is_worker_failure

logger = logging.getLogger(__name__)


class PerturbationPool:
    """The perturbation workers of one trainer (in-process, or N remote actors).

    Args:
        env_creator: the trainer's env creator.
        config: the trainer config (`num_workers`, `num_cpus_per_worker`, the fault-tolerance
            keys and what `PerturbationWorker` reads).
        noise: the shared noise block.
        layout: the layout of `theta`.

    Attributes:
        noise: the table for the trainer's own reads: with remote workers, the object store's
            copy (so the node holds one), else the array given.
        tasks_reissued: how many tasks went to another worker after theirs failed.
        bytes_received: the array bytes of every answer received so far (returns, lengths,
            indices and filter statistics: all a worker sends; Ray adds a small envelope).
    """

    def __init__(self, env_creator: Callable, config: dict, noise: np.ndarray, layout: FlatLayout):
        self._env_creator, self._config, self._layout = env_creator, config, layout
        self._num_workers = int(config["num_workers"])
        self.bytes_received = 0
        self.tasks_reissued = 0
        self._local: Optional[PerturbationWorker] = None
        self._ray: Any = None
        self._remote: Dict[int, Any] = {}  # worker index -> actor handle
        self.noise = noise  # the table the trainer reads directions from
        if self._num_workers == 0:
            self._local = PerturbationWorker(env_creator, config, 0, 0, noise, layout)
            return
        self._ray = init_ray(num_cpus=cpus_wanted(config, self._num_workers), address=config.get("address"))
        self._noise_ref = self._ray.put(noise)  # held: the workers' views point into it
        # The trainer reads the directions from the same copy (its own array can go).
        self.noise = self._ray.get(self._noise_ref)
        self._actor_class = self._ray.remote(PerturbationWorker)
        for index in range(1, self._num_workers + 1):
            self._remote[index] = self._start(index)

    def _start(self, index: int) -> Any:
        # The noise goes in as an ObjectRef argument: Ray resolves it to a zero-copy,
        # read-only view of the object store's single copy.
        return self._actor_class.options(num_cpus=self._config["num_cpus_per_worker"], max_restarts=0).remote(
            self._env_creator, self._config, index, self._num_workers, self._noise_ref, self._layout)

    def num_healthy_workers(self) -> int:
        return len(self._remote)

    def worker_handles(self) -> Dict[int, Any]:
        """Worker index -> Ray actor handle (empty without remote workers)."""
        return dict(self._remote)

    def foreach_env(self, fn: Callable[[Any], Any]) -> List[Any]:
        """`fn(env)` on each worker's env (in worker order)."""
        if self._local is not None:
            return [fn(self._local.env)]
        return self._ray.get([h.__ray_call__.remote(lambda worker: fn(worker.env)) for h in self._remote.values()])

    def run(self, theta: np.ndarray, filter_state: Dict[str, Any], next_task: Callable[[], Optional[RolloutTask]],
            on_result: Callable[[RolloutResult], None]) -> None:
        """Runs tasks until `next_task()` returns None and every task handed out has
        answered; `on_result` sees each answer (and may make `next_task` stop)."""
        if self._local is not None:
            task = next_task()
            while task is not None:
                result = self._local.run(theta, filter_state, task)
                self.bytes_received += result.payload_bytes()
                on_result(result)
                task = next_task()
            return
        ray = self._ray
        theta_ref, filter_ref = ray.put(theta), ray.put(filter_state)
        in_flight: Dict[Any, tuple] = {}
        reissue: Deque[RolloutTask] = deque()

        def hand_out(index: int) -> None:
            task = reissue.popleft() if reissue else next_task()
            if task is not None:
                in_flight[self._remote[index].run.remote(theta_ref, filter_ref, task)] = (index, task)

        for index in list(self._remote):
            hand_out(index)
        while in_flight:
            (ref,), _ = ray.wait(list(in_flight), num_returns=1)
            index, task = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as e:
                if not is_worker_failure(e):
                    raise
                reissue.append(task)  # its directions are tried again, by another worker
                self.tasks_reissued += 1
                replaced = self._on_failure(index, e)
                idle = [i for i in self._remote if i not in {w for w, _ in in_flight.values()}]
                for i in ([index] if replaced else []) + [i for i in idle if i != index]:
                    if reissue:
                        hand_out(i)
                if not in_flight and reissue:
                    raise WorkerFailureError("every perturbation worker failed; none is left to run the "
                                             "remaining directions") from e
                continue
            self.bytes_received += result.payload_bytes()
            on_result(result)
            hand_out(index)

    def _on_failure(self, index: int, error: BaseException) -> bool:
        """Drops (or replaces) failed worker `index`; True when it was replaced."""
        cfg = self._config
        if not (cfg["ignore_worker_failures"] or cfg["recreate_failed_workers"]):
            raise WorkerFailureError(
                f"Perturbation worker {index} failed during train(): {error}\nTo go on without it set "
                "'ignore_worker_failures': True; to replace it with a new worker set "
                "'recreate_failed_workers': True.") from error
        handle = self._remote.pop(index)
        try:
            self._ray.kill(handle)
        except Exception:  # already gone
            pass
        if cfg["recreate_failed_workers"]:
            logger.warning("Perturbation worker %d failed (%s); recreating it", index, str(error).splitlines()[0])
            self._remote[index] = self._start(index)
            return True
        logger.warning("Perturbation worker %d failed (%s); going on without it", index, str(error).splitlines()[0])
        if not self._remote:
            raise WorkerFailureError(f"No healthy perturbation worker is left (worker {index} failed); set "
                                     "'recreate_failed_workers': True to replace failed workers") from error
        return False

    def stop(self) -> None:
        if self._local is not None:
            self._local.stop()
        for handle in self._remote.values():
            try:
                self._ray.kill(handle)
            except Exception:  # already gone
                pass
        self._remote = {}


__all__ = ["PerturbationPool"]
