"""Evaluation: a trainer's evaluation workers (`Evaluator`); `rlfleet evaluate`
(`rlfleet.trainer.evaluate_checkpoint`) runs on them too, one rollout path.

Both run whole episodes on evaluation workers (`in_evaluation=True`, complete episodes, no
background sampling) through `WorkerSet.sample_episodes`: the same sampler, episode-end
rules and filters as training, never a loop of their own.
"""
from __future__ import annotations

import concurrent.futures
import copy
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from rlfleet.config import validate_config
from rlfleet.rollout.metrics import summarize_episodes
from rlfleet.rollout.worker_set import WorkerSet
from rlfleet.utils.deep_update import merge_dicts

T = TypeVar("T")


def evaluation_worker_config(config: dict, overrides: Optional[dict] = None) -> dict:
    """The config evaluation workers run with: `config` merged with its `evaluation_config`
    and `overrides`, validated, then always whole episodes with the weights they are given.

    `output` records the episodes evaluation runs only when `evaluation_config` (or the
    overrides) set it (2.x's old-stack way to record a trained policy); the top level's is for
    the training samples, and the evaluation workers do not inherit it.

    Raises:
        ValueError: `evaluation_config.in_evaluation` is False; an `output` with an offline
            `input` (evaluation records what it runs in the env).
    """
    extra = merge_dicts(copy.deepcopy(config["evaluation_config"] or {}), overrides or {})
    if extra.get("in_evaluation") is False:
        raise ValueError("`evaluation_config.in_evaluation` cannot be False: evaluation workers always run "
                         "with in_evaluation=True")
    extra.setdefault("output", None)
    eval_config = merge_dicts(config, extra)
    validate_config(eval_config)
    if eval_config["output"] is not None and eval_config.get("input", "sampler") != "sampler":
        raise ValueError(f"`evaluation_config.output`: {eval_config['output']!r} records the episodes evaluation "
                         f"runs in the env, which reads `input` {eval_config['input']!r} when it records; add "
                         "input_='sampler' to evaluation_config (BCConfig.overrides(input_='sampler', output=...))")
    # No background sampling thread: an episode must run with the weights it was given.
    eval_config.update({"batch_mode": "complete_episodes", "in_evaluation": True, "sample_async": False})
    return eval_config


class Evaluator:
    """A trainer's evaluation: its worker set (made at start when `evaluation_interval` is
    set, else on first use), syncing it, and running `evaluation_num_episodes` episodes
    (or the `custom_eval_function`), in line or beside training.

    Args:
        config: the trainer config (read live: a key changed between iterations counts).
        training_workers: the trainer's WorkerSet (weights, filters, policy changes come from it).
        make_workers: `(config, num_workers) -> WorkerSet` (the trainer's worker factory).
    """

    def __init__(self, *, config: dict, training_workers: WorkerSet,
                 make_workers: Callable[[dict, int], WorkerSet]):
        self.config = config
        self._training = training_workers
        self._make_workers = make_workers
        self.workers: Optional[WorkerSet] = None
        if config.get("evaluation_interval"):
            self.workers = self.build_workers()

    def build_workers(self, overrides: Optional[dict] = None, num_workers: Optional[int] = None) -> WorkerSet:
        """A new evaluation worker set (`overrides` over the evaluation config), with the
        training workers' run-time policy changes replayed on it."""
        if num_workers is None:
            num_workers = int(self.config["evaluation_num_workers"])
        workers = self._make_workers(evaluation_worker_config(self.config, overrides), num_workers)
        workers.apply_policy_changes(self._training.policy_changes())
        return workers

    def due(self, iteration: int) -> bool:
        """Whether training iteration `iteration` (1-based) ends with an evaluation."""
        interval = self.config.get("evaluation_interval")
        return bool(interval) and iteration % interval == 0

    # --- running -----------------------------------------------------------------
    def sync(self, workers: Optional[WorkerSet] = None) -> None:
        """`workers` (default: the evaluation workers, made if needed) get the training local
        worker's weights (one object-store copy for all remote workers) and filters."""
        if workers is None:
            if self.workers is None:
                self.workers = self.build_workers()
            workers = self.workers
        local = self._training.local_worker()
        workers.sync_weights(from_worker=local)
        workers.sync_filters(local.get_filters())

    def run(self, trainer: Any) -> Dict[str, Any]:
        """`{"evaluation": metrics}` of `evaluation_num_episodes` episodes on the evaluation
        workers as they are (shared out among remote ones), or of `custom_eval_function`."""
        custom = self.config.get("custom_eval_function")
        if custom:
            metrics = custom(trainer, self.workers)
            if not metrics or not isinstance(metrics, dict):
                raise ValueError(f"`custom_eval_function` must return a non-empty dict of metrics, got {metrics!r}")
            return {"evaluation": metrics}
        episodes = self.workers.sample_episodes(int(self.config["evaluation_num_episodes"]))
        return {"evaluation": summarize_episodes(episodes)}

    def evaluate(self, trainer: Any) -> Dict[str, Any]:
        """Syncs, then runs (see `run`)."""
        self.sync()
        return self.run(trainer)

    def run_beside(self, trainer: Any, train: Callable[[], T]) -> Tuple[T, Dict[str, Any]]:
        """`train()` and an evaluation in a thread beside it (`evaluation_parallel_to_training`).

        Weights and filters go to the evaluation workers before `train()` starts, so the
        thread never reads them while training changes them.
        """
        self.sync()
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlfleet-evaluation") as pool:
            future = pool.submit(self.run, trainer)
            trained = train()
            return trained, future.result()

    # --- membership and state ----------------------------------------------------------
    def add_policy(self, **kwargs: Any) -> None:
        if self.workers is not None:
            self.workers.add_policy(**kwargs)

    def remove_policy(self, **kwargs: Any) -> None:
        if self.workers is not None:
            self.workers.remove_policy(**kwargs)

    def set_worker_state(self, state: Dict[str, Any]) -> None:
        """A training worker's state, applied to every evaluation worker, without the
        policies' RNG states (evaluation keeps its own random streams)."""
        if self.workers is None:
            return
        eval_state = dict(state, policies={pid: {k: v for k, v in p.items() if k != "rng"}
                                           for pid, p in state["policies"].items()})
        self.workers.foreach_worker(lambda w: w.set_state(eval_state))

    def stop(self) -> None:
        if self.workers is not None:
            self.workers.stop()


__all__ = ["Evaluator", "evaluation_worker_config"]
