"""EnvContext: the `env_config` dict an env creator receives, plus where the env runs."""

from __future__ import annotations

from typing import Any, Mapping


class EnvContext(dict):
    """The user's `env_config` dict, carrying the env's place in the worker set.

    An env creator receives one of these. It reads like the plain `env_config` dict
    (``ctx["key"]``), and its attributes say which worker and sub-env it builds, so that
    creators can e.g. seed by `worker_index` and `vector_index` or shard data.

    Attributes:
        worker_index: Index of the rollout worker; 0 is the local worker, remote workers
            count from 1.
        num_workers: Number of remote workers in the worker set (None when unknown).
        vector_index: Index of the sub-env within its worker's vector of envs.
        remote: Whether the sub-env runs as its own remote process/actor.
    """

    def __init__(
        self,
        env_config: Mapping[str, Any] | None = None,
        worker_index: int = 0,
        vector_index: int = 0,
        remote: bool = False,
        num_workers: int | None = None,
    ) -> None:
        """Args:
        env_config: The user's env config (copied shallowly); None means empty.
        worker_index: 0 for the local worker, >= 1 for remote workers.
        vector_index: Index of the sub-env within the worker.
        remote: Whether the sub-env is a remote env.
        num_workers: Number of remote workers, if known.
        """
        if env_config is not None and not isinstance(env_config, Mapping):
            raise TypeError(
                f"env_config must be a dict (mapping), got {type(env_config).__name__}: "
                f"{env_config!r}"
            )
        super().__init__(env_config or {})
        self.worker_index = int(worker_index)
        self.vector_index = int(vector_index)
        self.remote = bool(remote)
        self.num_workers = None if num_workers is None else int(num_workers)

    def copy_with_overrides(
        self,
        env_config: Mapping[str, Any] | None = None,
        worker_index: int | None = None,
        vector_index: int | None = None,
        remote: bool | None = None,
        num_workers: int | None = None,
    ) -> "EnvContext":
        """Returns a new EnvContext with the given fields replaced (None keeps the current).

        Args:
            env_config: Replacement config dict; None keeps a copy of this one.
            worker_index: Replacement worker index.
            vector_index: Replacement sub-env index.
            remote: Replacement remote flag.
            num_workers: Replacement number of workers.

        Returns:
            A new EnvContext; this one is left unchanged.
        """
        return EnvContext(
            dict(self) if env_config is None else env_config,
            worker_index=self.worker_index if worker_index is None else worker_index,
            vector_index=self.vector_index if vector_index is None else vector_index,
            remote=self.remote if remote is None else remote,
            num_workers=self.num_workers if num_workers is None else num_workers,
        )

    # Explicit reduce: rebuild through __init__ so pickling (Ray, multiprocessing) and
    # copy/deepcopy keep the attributes regardless of protocol, and so a subclass-free
    # plain dict of the config travels rather than our instance __dict__.
    def __reduce__(self):
        return (
            EnvContext,
            (dict(self), self.worker_index, self.vector_index, self.remote, self.num_workers),
        )

    def __repr__(self) -> str:
        return (
            f"EnvContext({dict.__repr__(self)}, worker_index={self.worker_index}, "
            f"vector_index={self.vector_index}, remote={self.remote}, "
            f"num_workers={self.num_workers})"
        )
