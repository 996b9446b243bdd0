"""The functions a `WorkerSet` runs on its workers (`worker.apply(fn, ...)`).

Module-level so that Ray pickles them by reference (a lambda would be shipped per call).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.rollout_worker import RolloutWorker


def env_spaces(worker: RolloutWorker):
    # None where the env has no single pair of spaces (e.g. a multi-agent env).
    return worker.env_spaces()


def metrics_and_perf(worker: RolloutWorker):
    return worker.get_metrics(), worker.perf_stats()


def noop(worker: RolloutWorker) -> None:
    return None


def sample_once(worker: RolloutWorker) -> SampleBatch:
    return worker.sample()


def sample_rounds(worker: RolloutWorker, rounds: int
                   ) -> Tuple[List[SampleBatch], List[RolloutMetrics], Dict[str, float]]:
    # Several rounds' batches in one call (one Ray round trip instead of `rounds`), with the
    # metrics `collect_metrics` would otherwise fetch in a call of its own.
    batches = [worker.sample() for _ in range(rounds)]
    return batches, worker.get_metrics(), worker.perf_stats()


def sample_into(worker: RolloutWorker, process: Callable[[RolloutWorker, Any], Any], actors: List[Any],
                 method: str) -> Tuple[int, int]:
    batch = worker.sample()
    turn = worker.sink_turn
    worker.sink_turn = turn + 1
    getattr(actors[turn % len(actors)], method).remote(process(worker, batch))
    return batch.env_steps(), batch.agent_steps()


def persist_sample_count(worker: RolloutWorker, folder: str) -> None:
    worker.sample_counter.persist_to(folder)


def health_probe(worker: RolloutWorker) -> int:
    # As RLlib 1.x: a worker is healthy if it can still sample (a dead process, or an
    # env that keeps raising, is not).
    return worker.sample().count if worker.sampler is not None else 0


def episodes_only(worker: RolloutWorker, num_episodes: int) -> List[RolloutMetrics]:
    """`num_episodes` episodes' metrics, and only theirs (the worker's pending ones are
    dropped: evaluation workers report nothing else).

    An evaluation worker that records (`records_evaluation_episodes`) runs them through
    `sample()`, whose batches its writer writes, as RLlib's evaluation did; whole batches of
    complete episodes, so at least `num_episodes` (every one it ran is reported and recorded).
    """
    if worker.records_evaluation_episodes:
        worker.get_metrics()
        episodes: List[RolloutMetrics] = []
        while len(episodes) < num_episodes:
            worker.sample()
            episodes.extend(worker.get_metrics())
        return episodes
    episodes = worker.sample_episodes(num_episodes)
    worker.get_metrics()
    return episodes


def replay_policy_changes(worker: RolloutWorker, changes: List[Tuple[str, Dict[str, Any]]]) -> None:
    for op, kwargs in changes:
        if op == "add":
            worker.add_policy(**kwargs)
        else:
            worker.remove_policy(**kwargs)


def adopt_mapping(worker: RolloutWorker, policy_mapping_fn: Optional[Callable],
                   policies_to_train: List[str]) -> None:
    # The list only when it differs: setting it also ends "every policy trains" mode, which
    # a worker that already trains these policies should keep.
    if policy_mapping_fn is not None:
        worker.set_policy_mapping_fn(policy_mapping_fn)
    if list(worker.policies_to_train) != list(policies_to_train):
        worker.set_policies_to_train(policies_to_train)


def actor_key(handle) -> Any:
    return handle._actor_id.hex()
