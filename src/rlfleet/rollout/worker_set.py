"""WorkerSet: the local worker plus (in the distributed setting) remote ones."""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from rlfleet.rollout.rollout_worker import RolloutWorker


class WorkerSet:
    """The workers of one trainer (or of its evaluation).

    Args:
        env_creator: `EnvContext -> env` (None: no env).
        policy_class: the Policy subclass.
        trainer_config: the validated config.
        num_workers: remote workers to start (0: sample in this process).
    """

    def __init__(self, *, env_creator, policy_class: type, trainer_config: dict, num_workers: int = 0,
                 logdir: Optional[str] = None):
        if num_workers:
            raise ValueError(
                f"'num_workers': {num_workers} is not available yet in this version of rlfleet "
                "(needs remote workers on Ray); use the default 0"
            )
        self.config = trainer_config
        self.logdir = logdir
        self._local = RolloutWorker(
            env_creator=env_creator, policy_class=policy_class, config=trainer_config,
            worker_index=0, num_workers=num_workers,
        )
        self._remote: List[Any] = []

    def local_worker(self) -> RolloutWorker:
        return self._local

    def remote_workers(self) -> List[Any]:
        return list(self._remote)

    def num_remote_workers(self) -> int:
        return len(self._remote)

    def foreach_worker(self, fn: Callable[[RolloutWorker], Any]) -> list:
        return [fn(self._local)]

    def foreach_worker_with_index(self, fn: Callable[[RolloutWorker, int], Any]) -> list:
        return [fn(self._local, 0)]

    def foreach_policy(self, fn: Callable) -> list:
        return [r for results in self.foreach_worker(lambda w: w.foreach_policy(fn)) for r in results]

    def sync_weights(self, policies: Optional[List[str]] = None, global_vars: Optional[dict] = None) -> None:
        """Pushes the local weights (and global vars) to every other worker."""
        if global_vars:
            self._local.set_global_vars(global_vars)

    def stop(self) -> None:
        self._local.stop()
