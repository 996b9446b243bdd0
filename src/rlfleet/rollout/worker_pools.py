"""Where a trainer's asynchronous requests and helper actors run, chosen once where the workers
are wired: `RemoteWorkerPool` sends them to a `WorkerSet`'s Ray workers and actors,
`InProcessWorkerPool` runs them in this process on the trainer's own worker. Both have one
interface, so APEX, IMPALA/APPO and A3C write one loop that runs with `num_workers: 0` and with
remote workers (Acme's design: the same agent runs in one process or distributed, chosen when it
is launched; Hoffman et al. 2020, https://arxiv.org/abs/2006.00979).

The in-process pool keeps Ray's order where a loop can see it:
- a request (`submit`) runs when its answer is asked for (`ready_results`); the one worker
  runs one request at a time, so at most one is pending whatever `max_in_flight` says;
- an actor call (`call`) runs at once, in call order, and its future is ready at once; an
  error it raised comes out of `get`, as Ray's does;
- a worker function reaches an actor through `actor.<method>.remote(...)`; `as_handles` gives
  the in-process actors such handles.
"""
from __future__ import annotations

import abc
import contextlib
from typing import Any, Callable, ContextManager, List, Optional, Sequence, Tuple


class InProcessFuture:
    """The answer of an in-process call: its value, or the error it raised."""

    __slots__ = ("_value", "_error")

    def __init__(self, fn: Callable[..., Any], *args: Any):
        self._value: Any = None
        self._error: Optional[BaseException] = None
        try:
            self._value = fn(*args)
        except Exception as e:  # raised by `result()`, where Ray's `get` would raise it
            self._error = e

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class _InProcessMethod:
    __slots__ = ("_actor", "_name")

    def __init__(self, actor: Any, name: str):
        self._actor, self._name = actor, name

    def remote(self, *args: Any) -> InProcessFuture:
        # The method is looked up at call time, so a method replaced on the actor is the one run.
        return InProcessFuture(getattr(self._actor, self._name), *args)


class InProcessHandle:
    """An in-process actor as a worker function calls it: `handle.<method>.remote(*args)`."""

    __slots__ = ("_actor",)

    def __init__(self, actor: Any):
        self._actor = actor

    def __getattr__(self, name: str) -> _InProcessMethod:
        return _InProcessMethod(self._actor, name)


class ActorPool(abc.ABC):
    """Helper actors (e.g. replay shards) started, called and awaited the same way in this
    process and on Ray. A handle is what `start_actors` returned: a Ray actor handle, or the
    object itself in this process."""

    # True: everything runs in this process (no Ray), and a worker acts with the learner's own
    # model; a loop reads it where sharing one model changes what it must do.
    in_process: bool = False

    @abc.abstractmethod
    def start_actors(self, cls: type, actor_args: Sequence[tuple], **options: Any) -> List[Any]:
        """One actor of `cls` per tuple of constructor arguments (`options`: Ray's actor options,
        e.g. `num_cpus`; ignored in this process); their handles."""

    @abc.abstractmethod
    def call(self, handle: Any, method: str, *args: Any) -> Any:
        """`handle.<method>(*args)`; its future (may be dropped for a call not awaited)."""

    @abc.abstractmethod
    def wait(self, futures: Sequence[Any], timeout_s: Optional[float] = 0.0,
             num_returns: Optional[int] = None) -> Tuple[List[Any], List[Any]]:
        """`(ready, pending)` after waiting up to `timeout_s` for `num_returns` (None: all)."""

    @abc.abstractmethod
    def get(self, futures: Sequence[Any]) -> List[Any]:
        """The values of `futures` (waits for them; raises the error of a failed call)."""

    @abc.abstractmethod
    def put(self, value: Any) -> Any:
        """`value` stored once for many calls (Ray's object store; here the value itself)."""

    @abc.abstractmethod
    def kill_actors(self, handles: Sequence[Any]) -> None:
        """Ends actors of `start_actors` (ones already gone are skipped)."""

    @abc.abstractmethod
    def as_handles(self, handles: Sequence[Any]) -> List[Any]:
        """`handles` as a worker function calls them: `handle.<method>.remote(*args)`."""

    def foreach(self, handles: Sequence[Any], fn: Callable[[Any], Any]) -> List[Any]:
        """`fn(actor)` run inside each actor of `handles`; the values, in that order."""
        return self.get([self.call(h, "__ray_call__", fn) for h in handles])


class InProcessActorPool(ActorPool):
    """Helper actors as plain objects in this process (see the module docstring)."""

    in_process = True

    def start_actors(self, cls: type, actor_args: Sequence[tuple], **options: Any) -> List[Any]:
        return [cls(*args) for args in actor_args]

    def call(self, handle: Any, method: str, *args: Any) -> InProcessFuture:
        return InProcessFuture(getattr(handle, method), *args)

    def wait(self, futures: Sequence[Any], timeout_s: Optional[float] = 0.0,
             num_returns: Optional[int] = None) -> Tuple[List[Any], List[Any]]:
        futures = list(futures)  # each was answered when called
        n = len(futures) if num_returns is None else int(num_returns)
        return futures[:n], futures[n:]

    def get(self, futures: Sequence[Any]) -> List[Any]:
        # A value of `put` is its own future, as Ray's `get` of a `put` gives the value back.
        return [f.result() if isinstance(f, InProcessFuture) else f for f in futures]

    def put(self, value: Any) -> Any:
        return value

    def kill_actors(self, handles: Sequence[Any]) -> None:
        pass  # nothing runs apart from this process

    def as_handles(self, handles: Sequence[Any]) -> List[Any]:
        return [InProcessHandle(h) for h in handles]

    def foreach(self, handles: Sequence[Any], fn: Callable[[Any], Any]) -> List[Any]:
        return [fn(h) for h in handles]


class WorkerPool(ActorPool):
    """A trainer's rollout workers for requests answered in the order they finish, plus helper
    actors. Worker indices are the `worker_index` of each worker (0: the trainer's own)."""

    @abc.abstractmethod
    def submit(self, fn: Callable[..., Any], *args: Any, max_in_flight: int = 1) -> List[int]:
        """Asks each worker with fewer than `max_in_flight` requests pending to run
        `fn(worker, *args)`; the worker index of each request sent."""

    @abc.abstractmethod
    def ready_results(self, timeout_s: Optional[float] = None) -> List[Tuple[int, Any]]:
        """`(worker_index, answer)` of the requests that have finished, waiting up to
        `timeout_s` (None: forever) for the first one when none has."""

    @abc.abstractmethod
    def sync_worker(self, index: int, weights: Callable[[], Any], global_vars: dict) -> bool:
        """Gives worker `index` the learner's weights (`weights()`: the weights, or a handle
        of `put`) and `global_vars`; True when weights were sent (not in this process, where
        the worker acts with the learner's own model)."""

    @abc.abstractmethod
    def share_global_vars(self, global_vars: dict) -> None:
        """The trainer's global vars to a worker that acts with the learner's own model (a
        remote worker gets them with its weights, in `sync_worker`)."""


class RemoteWorkerPool(WorkerPool):
    """The remote workers of `workers` (a `WorkerSet`), and helper actors on Ray."""

    in_process = False

    def __init__(self, workers: Any):
        self.workers = workers

    def submit(self, fn: Callable[..., Any], *args: Any, max_in_flight: int = 1) -> List[int]:
        return self.workers.submit_async(fn, *args, max_in_flight=max_in_flight)

    def ready_results(self, timeout_s: Optional[float] = None) -> List[Tuple[int, Any]]:
        return self.workers.ready_results(timeout_s=timeout_s)

    def sync_worker(self, index: int, weights: Callable[[], Any], global_vars: dict) -> bool:
        self.workers.push_weights([index], weights(), global_vars)
        return True

    def share_global_vars(self, global_vars: dict) -> None:
        pass  # they travel with the weights

    def start_actors(self, cls: type, actor_args: Sequence[tuple], **options: Any) -> List[Any]:
        return self.workers.start_actors(cls, actor_args, **options)

    def call(self, handle: Any, method: str, *args: Any) -> Any:
        return self.workers.call_actor(handle, method, *args)

    def wait(self, futures: Sequence[Any], timeout_s: Optional[float] = 0.0,
             num_returns: Optional[int] = None) -> Tuple[List[Any], List[Any]]:
        return self.workers.wait_futures(futures, timeout_s=timeout_s)

    def get(self, futures: Sequence[Any]) -> List[Any]:
        return self.workers.get_futures(futures)

    def put(self, value: Any) -> Any:
        return self.workers.put_weights(value)

    def kill_actors(self, handles: Sequence[Any]) -> None:
        self.workers.kill_actors(handles)

    def as_handles(self, handles: Sequence[Any]) -> List[Any]:
        return list(handles)


class InProcessWorkerPool(InProcessActorPool, WorkerPool):
    """The trainer's own worker answers the requests, in this process.

    Args:
        worker: the local `RolloutWorker`.
        lock: held while a request runs (e.g. the learner thread's lock, when the learner
            updates the model this worker acts with); None: no lock.
    """

    def __init__(self, worker: Any, lock: Optional[ContextManager] = None):
        self.worker = worker
        self.lock: ContextManager = lock if lock is not None else contextlib.nullcontext()
        self._pending: Optional[Tuple[Callable[..., Any], tuple]] = None

    def submit(self, fn: Callable[..., Any], *args: Any, max_in_flight: int = 1) -> List[int]:
        if self._pending is not None or max_in_flight < 1:
            return []
        self._pending = (fn, args)
        return [0]

    def ready_results(self, timeout_s: Optional[float] = None) -> List[Tuple[int, Any]]:
        if self._pending is None:
            return []
        fn, args = self._pending
        self._pending = None
        with self.lock:
            return [(0, fn(self.worker, *args))]

    def sync_worker(self, index: int, weights: Callable[[], Any], global_vars: dict) -> bool:
        self.worker.set_global_vars(global_vars)
        return False

    def share_global_vars(self, global_vars: dict) -> None:
        self.worker.set_global_vars(global_vars)


def worker_pool(workers: Any, lock: Optional[ContextManager] = None) -> WorkerPool:
    """The pool of `workers` (a `WorkerSet`): its remote workers when it has any, else its
    local worker in this process (running each request under `lock`)."""
    if workers.remote_workers():
        return RemoteWorkerPool(workers)
    return InProcessWorkerPool(workers.local_worker(), lock)


__all__ = ["ActorPool", "InProcessActorPool", "InProcessFuture", "InProcessHandle", "InProcessWorkerPool",
           "RemoteWorkerPool", "WorkerPool", "worker_pool"]
