"""`WorkerSet`'s asynchronous requests (IMPALA, APPO, A3C) and helper actors (e.g. Ape-X
replay shards): requests sent to the remote workers and answered in the order they finish.

A part of `WorkerSet` (a base class of it, in its own module for size); it uses the set's
remote workers (`_remote`, `_remote_index`), its Ray module (`_ray`) and config.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.rollout.worker_calls import actor_key, sample_once, sample_into
from rlfleet.rollout.worker_membership import cpus_wanted
from rlfleet.utils.ray_utils import init_ray


class AsyncRequests:
    """Requests answered in completion order, and Ray actors besides the workers."""

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
            key = actor_key(handle)
            for _ in range(int(max_in_flight) - pending.get(key, 0)):
                self._in_flight[handle.apply.remote(fn, *args)] = (key, index)
                sent.append(index)
        return sent

    def sample_async_requests(self, max_in_flight: int = 1) -> List[int]:
        """`submit_async` of one `sample()` per free slot: keeps up to `max_in_flight`
        sample requests pending on every remote worker."""
        return self.submit_async(sample_once, max_in_flight=max_in_flight)

    def ready_results(self, timeout_s: Optional[float] = None) -> List[Tuple[int, Any]]:
        """`(worker_index, answer)` for every request of `submit_async` that has finished,
        waiting up to `timeout_s` (None: forever) for the first one when none has.

        Raises:
            ray.exceptions.RayError: a worker died or raised (its request is dropped; the
                trainer's fault tolerance takes over, see `rlfleet.fault_tolerance`).
        """
        self._forget_removed_requests()
        # Answers fetched by a call that then hit a failed worker: theirs first.
        out, self._answers_kept = self._answers_kept, []
        refs = list(self._in_flight)
        if not refs:
            return out
        ray = self._ray
        ready, rest = ray.wait(refs, num_returns=1, timeout=0 if out else timeout_s)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            _, index = self._in_flight.pop(ref)
            try:
                out.append((index, ray.get(ref)))
            except Exception:
                # The answers already fetched (from healthy workers) would be lost with the
                # exception: the next call returns them.
                self._answers_kept = out
                raise
        return out

    # The name the sampling loops read best with.
    ready_batches = ready_results

    def num_in_flight(self) -> int:
        """Requests of `submit_async` sent and not yet returned by `ready_results`."""
        self._forget_removed_requests()
        return len(self._in_flight) + len(self._answers_kept)

    def _forget_removed_requests(self) -> None:
        live = {actor_key(h) for h in self._remote}
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
        return self.submit_async(sample_into, process, list(actors), method, max_in_flight=max_in_flight)

    def start_actors(self, cls: type, actor_args: Sequence[tuple], *, num_cpus: float = 0.0,
                     resources: Optional[Dict[str, float]] = None) -> List[Any]:
        """Starts one Ray actor of class `cls` per tuple of constructor arguments in
        `actor_args` (started Ray first if this set has no remote workers) and returns their
        handles; they live until `kill_actors`."""
        if self._ray is None:
            self._ray = init_ray(num_cpus=max(1.0, cpus_wanted(self.config, self._num_workers)))
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
