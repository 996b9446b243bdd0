"""Hands rollout tasks to the perturbation workers and gathers their answers; the only
place ES and ARS call Ray. It calls Ray itself, beside the WorkerSet, because these workers
are no RolloutWorkers: they score perturbations of a flat vector read from a shared noise
table and answer with returns, where a RolloutWorker samples batches for a policy.

One loop runs both wirings, chosen in `PerturbationPool.__init__`: with `num_workers: 0` one
worker in this process (`InProcessActorPool`: each task runs when handed out), with N
remote workers Ray actors (`RayActorPool`). There the noise table is put into the object store
once (every worker maps that one copy), each round's `theta` and filter state once (one
`ray.put`, many readers), and every idle worker gets the next task as soon as it answers. A
worker that dies (or raises) loses nothing: its task, with the same directions, goes to a
replacement (`recreate_failed_workers`) or to the remaining workers (`ignore_worker_failures`);
with neither set, `WorkerFailureError` is raised, as for the rollout workers (one
`FailurePolicy`).
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlfleet.algorithms.evolution.flat_policy import FlatLayout
from rlfleet.algorithms.evolution.rollouts import PerturbationWorker, RolloutResult, RolloutTask
from rlfleet.trainer.fault_tolerance import FailurePolicy, WorkerFailureError
from rlfleet.rollout.worker_membership import cpus_wanted
from rlfleet.rollout.worker_pools import ActorPool, InProcessActorPool
from rlfleet.utils.ray_utils import init_ray, is_worker_failure

logger = logging.getLogger(__name__)


class RayActorPool(ActorPool):
    """Perturbation workers as Ray actors (the `ActorPool` interface; no restarts: a failure
    goes to the `FailurePolicy`)."""

    in_process = False

    def __init__(self, config: dict, num_workers: int):
        self.ray = init_ray(num_cpus=cpus_wanted(config, num_workers), address=config.get("address"))

    def start_actors(self, cls: type, actor_args: Sequence[tuple], **options: Any) -> List[Any]:
        remote_cls = self.ray.remote(cls)
        return [remote_cls.options(max_restarts=0, **options).remote(*args) for args in actor_args]

    def call(self, handle: Any, method: str, *args: Any) -> Any:
        return getattr(handle, method).remote(*args)

    def wait(self, futures: Sequence[Any], timeout_s: Optional[float] = 0.0,
             num_returns: Optional[int] = None) -> Tuple[List[Any], List[Any]]:
        futures = list(futures)
        return self.ray.wait(futures, num_returns=len(futures) if num_returns is None else num_returns,
                             timeout=timeout_s)

    def get(self, futures: Sequence[Any]) -> List[Any]:
        return self.ray.get(list(futures))

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def kill_actors(self, handles: Sequence[Any]) -> None:
        for handle in handles:
            try:
                self.ray.kill(handle)
            except Exception:  # already gone
                pass

    def as_handles(self, handles: Sequence[Any]) -> List[Any]:
        return list(handles)


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
        # === wiring: in this process or on Ray, chosen here once ===
        if self._num_workers == 0:
            self.actors: ActorPool = InProcessActorPool()
            indices = [0]
        else:
            self.actors = RayActorPool(config, self._num_workers)
            indices = list(range(1, self._num_workers + 1))
        self._noise_ref = self.actors.put(noise)  # held: the workers' views point into it
        # The trainer reads the directions from the same copy (its own array can go).
        self.noise = self.actors.get([self._noise_ref])[0]
        self._workers: Dict[int, Any] = {index: self._start(index) for index in indices}  # index -> handle

    def _start(self, index: int) -> Any:
        # The noise goes in as an ObjectRef argument: Ray resolves it to a zero-copy,
        # read-only view of the object store's single copy.
        args = (self._env_creator, self._config, index, self._num_workers, self._noise_ref, self._layout)
        return self.actors.start_actors(PerturbationWorker, [args], num_cpus=self._config["num_cpus_per_worker"])[0]

    def num_healthy_workers(self) -> int:
        """The remote workers alive (0 without remote workers)."""
        return 0 if self.actors.in_process else len(self._workers)

    def worker_handles(self) -> Dict[int, Any]:
        """Worker index -> Ray actor handle (empty without remote workers)."""
        return {} if self.actors.in_process else dict(self._workers)

    def foreach_env(self, fn: Callable[[Any], Any]) -> List[Any]:
        """`fn(env)` on each worker's env (in worker order)."""
        return self.actors.foreach(list(self._workers.values()), lambda worker: fn(worker.env))

    def run(self, theta: np.ndarray, filter_state: Dict[str, Any], next_task: Callable[[], Optional[RolloutTask]],
            on_result: Callable[[RolloutResult], None]) -> None:
        """Runs tasks until `next_task()` returns None and every task handed out has
        answered; `on_result` sees each answer (and may make `next_task` stop)."""
        actors = self.actors
        theta_ref, filter_ref = actors.put(theta), actors.put(filter_state)
        in_flight: Dict[Any, tuple] = {}
        reissue: Deque[RolloutTask] = deque()

        def hand_out(index: int) -> None:
            task = reissue.popleft() if reissue else next_task()
            if task is not None:
                in_flight[actors.call(self._workers[index], "run", theta_ref, filter_ref, task)] = (index, task)

        for index in list(self._workers):
            hand_out(index)
        while in_flight:
            (ref,), _ = actors.wait(list(in_flight), timeout_s=None, num_returns=1)
            index, task = in_flight.pop(ref)
            try:
                result = actors.get([ref])[0]
            except Exception as e:
                if not is_worker_failure(e):
                    raise
                reissue.append(task)  # its directions are tried again, by another worker
                self.tasks_reissued += 1
                replaced = self._on_failure(index, e)
                idle = [i for i in self._workers if i not in {w for w, _ in in_flight.values()}]
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
        policy = FailurePolicy.from_config(self._config)
        policy.check_tolerated(f"Perturbation worker {index}", error)
        logger.warning("Perturbation worker %d failed: %s", index, str(error).splitlines()[0])
        self.actors.kill_actors([self._workers.pop(index)])
        if policy.replace("perturbation", [index], len(self._workers)):
            self._workers[index] = self._start(index)
            return True
        return False

    def stop(self) -> None:
        if self.actors.in_process:
            for worker in self._workers.values():
                worker.stop()
        self.actors.kill_actors(list(self._workers.values()))
        self._workers = {}


__all__ = ["PerturbationPool", "RayActorPool"]
