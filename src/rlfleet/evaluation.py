"""Evaluation: a trainer's evaluation workers (`Evaluator`) and `rlfleet evaluate`
(`evaluate_checkpoint`), on one rollout path.

Both run whole episodes on evaluation workers (`in_evaluation=True`, complete episodes, no
background sampling) through `WorkerSet.sample_episodes`: the same sampler, episode-end
rules and filters as training, never a loop of their own.
"""
from __future__ import annotations

import concurrent.futures
import copy
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from rlfleet.config import validate_config
from rlfleet.rollout.metrics import summarize_episodes
from rlfleet.rollout.worker_set import WorkerSet
from rlfleet.utils.deep_update import merge_dicts

T = TypeVar("T")


def evaluation_worker_config(config: dict, overrides: Optional[dict] = None) -> dict:
    """The config evaluation workers run with: `config` merged with its `evaluation_config`
    and `overrides`, validated, then always whole episodes with the weights they are given.

    Raises:
        ValueError: `evaluation_config.in_evaluation` is False.
    """
    extra = merge_dicts(copy.deepcopy(config["evaluation_config"] or {}), overrides or {})
    if extra.get("in_evaluation") is False:
        raise ValueError("`evaluation_config.in_evaluation` cannot be False: evaluation workers always run "
                         "with in_evaluation=True")
    eval_config = merge_dicts(config, extra)
    validate_config(eval_config)
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


# --- rlfleet evaluate ------------------------------------------------------------------
class _NoLogger:
    def on_result(self, result: Any) -> None:
        pass

    def close(self) -> None:
        pass


def evaluate_checkpoint(
    checkpoint_path: str,
    num_episodes: int,
    *,
    env: Optional[str] = None,
    render: bool = False,
    video: Optional[str] = None,
    trusted_modules: Optional[Sequence[str]] = None,
    on_episode: Optional[Callable[[int, float, int], None]] = None,
) -> Dict[str, Any]:
    """Restores `checkpoint_path` (`Trainer.from_checkpoint`) and runs its policies without
    exploration in one env, episode after episode (the reference era's `rllib rollout`).

    The episodes run on an evaluation worker (the checkpoint's `evaluation_config` applies,
    with `explore=False` and one env), through the same sampler as training: the restored
    preprocessors and filters, actions unsquashed / clipped as in training, the episode-end
    rules of the config, envs seeded from the config's `seed` when there is one. Each
    episode starts from the checkpoint's filter statistics.

    Args:
        checkpoint_path: a checkpoint folder.
        num_episodes: how many episodes to run.
        env: an env to use instead of the checkpoint's (its spaces must fit the policy).
        render: render each step (Gymnasium ids are made with `render_mode="human"`).
        video: a folder to record every episode into as MP4 files (`record_env`; relative to the
            current folder).
        trusted_modules: modules the checkpoint's classes and functions may be imported
            from (see `Trainer.from_checkpoint`).
        on_episode: called as `(index, return, length)` after each episode.

    Returns:
        `{"checkpoint", "algorithm", "env", "episodes": [{"return", "length"}], "mean_return"}`.
    """
    from rlfleet.trainer import Trainer

    overrides: Dict[str, Any] = {"num_workers": 0, "evaluation_interval": None, "evaluation_num_workers": 0}
    if env is not None:
        overrides["env"] = env
    logdir = tempfile.mkdtemp(prefix="rlfleet-evaluate-")
    trainer = workers = None
    try:
        trainer = Trainer.from_checkpoint(checkpoint_path, overrides, trusted_modules=trusted_modules,
                                          logdir=logdir, logger_creator=lambda cfg: _NoLogger())
        run_config: Dict[str, Any] = {"explore": False, "num_envs_per_worker": 1}
        if render:
            env_config = dict(trainer.config.get("env_config") or {}, render_mode="human")
            run_config.update(render_env=True, env_config=env_config)
        if video:
            # Resolved here: a relative folder would land in the temporary run folder, deleted below.
            run_config.update(record_env=os.path.abspath(os.path.expanduser(video)), _record_env_episodes=int(num_episodes))
        workers = trainer.evaluator.build_workers(run_config, num_workers=0)
        episodes: List[Dict[str, Any]] = []
        for index in range(int(num_episodes)):
            trainer.evaluator.sync(workers)
            (metrics,) = workers.sample_episodes(1)
            episodes.append({"return": float(metrics.episode_reward), "length": int(metrics.episode_length)})
            if on_episode is not None:
                on_episode(index, episodes[-1]["return"], episodes[-1]["length"])
        env_name = trainer.config.get("env")
        return {
            "checkpoint": str(checkpoint_path),
            "algorithm": repr(trainer),
            "env": env_name if isinstance(env_name, str) else repr(env_name),
            "episodes": episodes,
            "mean_return": sum(e["return"] for e in episodes) / len(episodes),
        }
    finally:
        if workers is not None:
            workers.stop()
        if trainer is not None:
            trainer.stop()
        shutil.rmtree(logdir, ignore_errors=True)


__all__ = ["Evaluator", "evaluation_worker_config", "evaluate_checkpoint"]
