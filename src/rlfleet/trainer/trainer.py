"""Trainer: builds the workers from one config and runs train() / evaluate() iterations.

An algorithm subclasses `Trainer`, sets `_name`, `_default_config` and `_policy_class`,
and writes `training_step()` as straight-line code (sample, learn, sync). Evaluation lives
in evaluation.py, resource requests in resources.py, worker-failure handling in
fault_tolerance.py, state and checkpoints in trainer_state.py (the file format in checkpoint/),
acting on raw observations in acting.py (through trainer_policies.py), RLlib 2.x's method
names in algorithm_api.py (`rlfleet.Algorithm` is this class); Ray is called only inside the
WorkerSet.
"""
from __future__ import annotations

import copy
import logging
import os
import time
from datetime import datetime
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence

from rlfleet.config import (
    ALLOW_UNKNOWN_SUBKEYS,
    COMMON_CONFIG,
    ConfigKey,
    OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
    merge_configs,
    rename_rllib2_keys,
    validate_config,
)
from rlfleet.config.fragments import oversized_batch_warning
from rlfleet.env.old_api import with_old_api_adapters
from rlfleet.env.registry import resolve_env
from rlfleet.env.task_settable import apply_env_task_fn
from rlfleet.env.wrappers.atari import with_atari_preprocessing
from rlfleet.trainer.algorithm_api import AlgorithmMethods
from rlfleet.trainer.evaluation import Evaluator
from rlfleet.trainer.fault_tolerance import MAX_WORKER_FAILURE_RETRIES, WorkerFailureError, recover_workers, run_with_recovery
from rlfleet.results.logger import UnifiedLogger, make_logdir, sys_usage
from rlfleet.results.rllib2_keys import add_rllib2_keys
from rlfleet.trainer.trainer_checks import check_models_fit_spaces, check_required_fast_paths
from rlfleet.trainer.resources import ResourceRequest, configure_driver, default_resource_request
from rlfleet.rollout.metrics import EpisodeWindow, merge_perf, summarize_episodes
from rlfleet.rollout.worker_set import WorkerSet
from rlfleet.trainer.trainer_policies import TrainerPolicies
from rlfleet.trainer.trainer_state import TrainerState

logger = logging.getLogger(__name__)


class Trainer(TrainerState, TrainerPolicies, AlgorithmMethods):
    """Coordinates sampling and learning for one algorithm.

    Args:
        config: partial config; merged over the algorithm's `DEFAULT_CONFIG`.
        env: the env (registered name, Gymnasium id, class path or class); overrides
            `config["env"]`.
        logger_creator: `config -> logger` with `on_result(result)` and `close()`;
            default writes params.json, result.json and progress.csv under `logdir`.
        logdir: the results folder (default: a new folder under `~/rlfleet_results`).
    """

    _name = "Trainer"
    _default_config: dict = COMMON_CONFIG
    _policy_class: Optional[type] = None
    # The algorithm's own keys (`ConfigKey`s): their checks run with the common keys'.
    _algo_keys: Sequence[ConfigKey] = ()
    _allow_unknown_configs = False
    # Whether each training step samples `train_batch_size` env steps in whole rounds of rollout
    # fragments (`sample_train_batch`): then a round far over that size gets a warning naming the
    # keys (rlfleet/config/fragments.py). Off-policy, asynchronous and evolution trainers size
    # their sampling otherwise.
    samples_train_batch: bool = False
    _allow_unknown_subkeys = ALLOW_UNKNOWN_SUBKEYS
    _override_all_subkeys_if_type_changes = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES

    def __init__(
        self,
        config: Optional[dict] = None,
        env: Any = None,
        logger_creator: Optional[Callable[[dict], Any]] = None,
        *,
        logdir: Optional[str] = None,
    ):
        config = rename_rllib2_keys(config or {}, self._default_config)  # RLlib 2.x's names -> the stored 1.x keys
        self._env_id, self.env_creator = resolve_env(env if env is not None else config.get("env"))
        # An env class (given as one, or registered under its name) is recorded by qualified
        # name, so that a checkpoint rebuilds it in another process.
        self._env_class = getattr(self.env_creator, "cls", None)
        if self._env_id is not None:
            config["env"] = self._env_id
        self.raw_user_config = config
        self.config = self.merge_trainer_configs(self._default_config, config, self._allow_unknown_configs)
        self._validate_config(self.config, trainer_obj_or_none=self)
        oversized = oversized_batch_warning(self.config) if self.samples_train_batch else None
        if oversized:
            logger.warning("%s: %s", self._name, oversized)
        # Atari image envs get the preprocessing `preprocessor_pref` asks for, wherever the
        # trainer's env creator is used (workers, evaluation); wrapping twice is a no-op.
        # Old gym-API and old multi-agent `dones` envs adapted (env/old_api.py), then Atari preprocessing.
        self.env_creator = with_atari_preprocessing(with_old_api_adapters(self.env_creator), self.config)
        if self._policy_class is None:
            raise TypeError(f"{type(self).__name__} must set `_policy_class`")

        configure_driver(self.config)
        self.callbacks = self.config["callbacks"]()

        self.iteration = 0
        self._time_total = 0.0
        self.counters: Dict[str, int] = {
            "num_env_steps_sampled": 0,
            "num_env_steps_trained": 0,
            "num_agent_steps_sampled": 0,
            "num_agent_steps_trained": 0,
        }
        self._episodes = EpisodeWindow(self.config["metrics_smoothing_episodes"])
        self._step_limit: Optional[int] = None

        self.logdir = logdir or make_logdir(self._name, self._env_id)
        os.makedirs(self.logdir, exist_ok=True)
        if self.config["multiagent"].get("policy_map_cache") is None:  # None: under the results folder
            self.config["multiagent"]["policy_map_cache"] = os.path.join(self.logdir, "policy_map_cache")
        self._result_logger = (logger_creator or (lambda cfg: UnifiedLogger(cfg, self.logdir)))(self.config)

        self.workers = self._make_workers(
            env_creator=self.env_creator, policy_class=self._policy_class,
            config=self.config, num_workers=self.config["num_workers"],
        )
        self.evaluator = Evaluator(config=self.config, training_workers=self.workers, make_workers=lambda cfg, n: (
            self._make_workers(env_creator=self.env_creator, policy_class=self._policy_class, config=cfg,
                               num_workers=n)))
        try:
            check_models_fit_spaces(self.workers.local_worker())
            check_required_fast_paths(self.config, self.workers.local_worker())
            self.setup(self.config)
        except BaseException:
            try:
                self.stop()  # the workers (and their processes) exist already
            except Exception:
                logger.exception("Stopping a trainer whose setup failed")
            raise
        self.callbacks.on_trainer_init(trainer=self)

    # --- config ------------------------------------------------------------------
    @classmethod
    def merge_trainer_configs(cls, config1: dict, config2: Optional[dict],
                              _allow_unknown_configs: Optional[bool] = None) -> dict:
        """`config1` deep-updated with `config2` under RLlib 1.x's rules (see rlfleet/config/merge.py)."""
        if _allow_unknown_configs is None:
            _allow_unknown_configs = cls._allow_unknown_configs
        return merge_configs(config1, config2, _allow_unknown_configs, cls._allow_unknown_subkeys,
                             cls._override_all_subkeys_if_type_changes)

    @staticmethod
    def _validate_config(config: dict, trainer_obj_or_none: Optional["Trainer"] = None) -> None:
        """Validates and normalises `config` in place (every common and algorithm key's
        check); `validate_algorithm_config` adds the rules that span several keys."""
        validate_config(config, trainer_obj_or_none._algo_keys if trainer_obj_or_none is not None else ())
        if trainer_obj_or_none is not None:
            trainer_obj_or_none.validate_algorithm_config(config)

    def validate_algorithm_config(self, config: dict) -> None:
        """Rules spanning several keys; raise ValueError naming the keys, values and fix."""

    def setup(self, config: dict) -> None:
        """Algorithm-specific initialisation after the workers exist."""

    def set_step_limit(self, timesteps_total: Optional[int]) -> None:
        """Ends each iteration once `timesteps_total` env steps were sampled over the run, so
        that a stop on that count (the CLI's `--stop '{"timesteps_total": N}'`) overshoots by at
        most one training step, not a whole iteration: the loop of training steps (see
        `timesteps_per_iteration`, `min_iter_time_s`) stops there, and algorithms whose one
        step is long (ES, ARS) read `steps_left()` to stop gathering there.

        Args:
            timesteps_total: the env-step count to stop at; None (the default): no limit.
        """
        self._step_limit = None if timesteps_total is None else int(timesteps_total)

    def steps_left(self) -> Optional[int]:
        """Env steps left before the limit of `set_step_limit` (0 once reached); None without one."""
        if self._step_limit is None:
            return None
        return max(0, self._step_limit - self.counters["num_env_steps_sampled"])

    def count_sampled(self, env_steps: int, agent_steps: int) -> None:
        """Adds a round of sampling to the counters: the one place the sampled-step counts grow
        (`timesteps_total`, `min_sample_timesteps_per_reporting` and the schedules read them)."""
        self.counters["num_env_steps_sampled"] += int(env_steps)
        self.counters["num_agent_steps_sampled"] += int(agent_steps)

    def _make_workers(self, *, env_creator, policy_class, config, num_workers) -> WorkerSet:
        return WorkerSet(env_creator=env_creator, policy_class=policy_class, trainer_config=config,
                         num_workers=num_workers, logdir=self.logdir)

    @classmethod
    def default_resource_request(cls, config: dict) -> ResourceRequest:
        """The resources this trainer needs with `config` (see `rlfleet.trainer.resources`): the
        driver, each remote worker, each evaluation worker when evaluation is on.

        Args:
            config: a (partial) config; missing keys take the algorithm's defaults.
        """
        return default_resource_request(cls._default_config, config)

    def user_config(self) -> Dict[str, Any]:
        """The config as given (before defaults), with an env class as the class itself (a
        "pkg.mod:make_env" function path stays a string: `env` takes no function)."""
        config = dict(self.raw_user_config)
        if isinstance(self._env_class, type):
            config["env"] = self._env_class
        return config

    @property
    def evaluation_workers(self) -> Optional[WorkerSet]:
        """The evaluation WorkerSet (None until evaluation is first needed)."""
        return self.evaluator.workers

    # --- the loop ----------------------------------------------------------------
    def training_step(self) -> Dict[str, Any]:
        """One round of sampling and learning; returns the learner info per policy."""
        raise NotImplementedError  # abstract

    def train(self) -> Dict[str, Any]:
        """Runs training steps for one iteration (at least `min_iter_time_s` seconds and
        `timesteps_per_iteration` env steps) and returns the result dict.

        A remote worker that dies (or raises) during the iteration is handled as in
        RLlib 1.x (`rllib/agents/trainer.py`), up to `MAX_WORKER_FAILURE_RETRIES` times per call: with
        `recreate_failed_workers` it is replaced by a new worker with the current policies,
        policy mapping, weights and filters; with `ignore_worker_failures` it is dropped and
        training goes on with the others; with neither, `WorkerFailureError` is raised.
        """
        start, iteration_before = time.time(), self.iteration
        result = run_with_recovery(lambda: self._train_iteration(start), self.config, recover=self._try_recover,
                                   undo=lambda: setattr(self, "iteration", iteration_before))
        if self.config.get("env_task_fn") is not None:
            # Curricula: every sub-env of every rollout worker gets its next task.
            self.workers.foreach_env_with_context(partial(apply_env_task_fn, self.config["env_task_fn"], result))
        took = time.time() - start
        self._time_total += took
        result["time_this_iter_s"] = took
        result["time_total_s"] = self._time_total
        self.log_result(result)
        return result

    def _train_iteration(self, start: float) -> Dict[str, Any]:
        """One iteration: training steps (beside an evaluation thread when
        `evaluation_parallel_to_training`), filter merge, metrics, evaluation."""
        evaluate_now = self.evaluator.due(self.iteration + 1)
        evaluation = None
        if evaluate_now and self.config.get("evaluation_parallel_to_training"):
            (learner_info, steps), evaluation = self.evaluator.run_beside(
                self, lambda: self._run_training_steps(start))
        else:
            learner_info, steps = self._run_training_steps(start)
        if self.config.get("observation_filter", "NoFilter") != "NoFilter":
            self.workers.merge_filters(update_remote=self.config["synchronize_filters"])
        self.iteration += 1
        result = self._compile_result(learner_info, steps)
        if evaluate_now:
            result.update(evaluation if evaluation is not None else self.evaluate())
        return add_rllib2_keys(result)  # after evaluation: its 2.x names too

    def _run_training_steps(self, start: float):
        sampled_before = self.counters["num_env_steps_sampled"]
        min_time = float(self.config.get("min_iter_time_s") or 0)
        min_steps = int(self.config.get("timesteps_per_iteration") or 0)
        while True:
            learner_info = self.training_step()
            steps = self.counters["num_env_steps_sampled"] - sampled_before
            if (time.time() - start >= min_time and steps >= min_steps) or self.steps_left() == 0:
                return learner_info, steps

    def take_own_episodes(self) -> List[Any]:
        """Finished episodes (`RolloutMetrics`) the algorithm gathered itself this iteration,
        counted with the workers' own; none by default. MAML's workers hand theirs back with
        each task's batches, as they restart episodes between tasks."""
        return []

    def _try_recover(self) -> None:
        """Drops failed remote workers (training and evaluation); recreates them when the
        config says so (see `train`)."""
        recover_workers((("rollout", self.workers), ("evaluation", self.evaluation_workers)), self.config,
                        from_worker=self.workers.local_worker(), global_vars=self._global_vars())

    def _report_fast_paths(self, learner_info: Dict[str, Any]) -> None:
        """Puts each learning policy's fast path plan (policy/fast_plan.py) next to its stats:
        `info/learner/<pid>/fast_path` ("numpy" or "torch") and `fast_path_reason`."""
        for pid, info in learner_info.items():
            policy = self.get_policy(pid) if isinstance(info, dict) else None
            plan = policy.fast_plan if policy is not None else None
            if plan is not None:
                info.update(plan.report())

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        self._report_fast_paths(learner_info)
        new_episodes, perfs = self.workers.collect_metrics(self.config.get("collect_metrics_timeout"))
        result = self._episodes.add(list(new_episodes) + self.take_own_episodes())
        now = datetime.now()
        result.update(
            episodes_total=self._episodes.total,
            timesteps_total=self.counters["num_env_steps_sampled"],
            timesteps_this_iter=steps_this_iter,
            agent_timesteps_total=self.counters["num_agent_steps_sampled"],
            training_iteration=self.iteration,
            num_healthy_workers=self.workers.num_remote_workers(),
            info={"learner": learner_info, **self.counters},
            sampler_perf=merge_perf(perfs),
            date=now.strftime("%Y-%m-%d_%H-%M-%S"),
            timestamp=int(now.timestamp()),
            done=False,
            pid=os.getpid(),
            **dict(self.counters),
        )
        if self.config.get("log_sys_usage"):
            perf = sys_usage()
            if perf:
                result["perf"] = perf
        return result

    def evaluate(self) -> Dict[str, Any]:
        """Runs `evaluation_num_episodes` episodes under `evaluation_config` with the
        current weights and filters; returns `{"evaluation": metrics}`.

        With `evaluation_num_workers > 0` the episodes are shared out among the remote
        evaluation workers, which run them in parallel; else the evaluation worker set's
        local worker runs them. The metrics carry RLlib 2.x's names too (`env_runners`).
        """
        return add_rllib2_keys(self.evaluator.evaluate(self))

    def _global_vars(self) -> Dict[str, Any]:
        return {"timestep": self.counters["num_env_steps_sampled"]}

    def get_config(self) -> Dict[str, Any]:
        """A copy of the full config this trainer runs with (defaults merged in), as RLlib
        1.x's `Trainer.get_config()`."""
        return copy.deepcopy(self.config)

    # --- checkpoints (saving and restoring: trainer_state.py) --------------------------
    @classmethod
    def from_checkpoint(cls, checkpoint_path: Any, config_overrides: Optional[dict] = None, *,
                        trusted_modules: Optional[Sequence[str]] = None, logdir: Optional[str] = None,
                        logger_creator: Optional[Callable[[dict], Any]] = None) -> "Trainer":
        """Rebuilds the trainer a checkpoint was written by (config from its manifest; classes
        and functions re-imported by qualified name, from trusted modules only) and restores it.

        Args:
            checkpoint_path: the checkpoint folder; or a Ray Tune `Checkpoint` (RLlib 2.x's
                `results.get_best_result(...).checkpoint`) or its folder, whose newest rlfleet
                checkpoint is loaded.
            config_overrides: config entries replacing the recorded ones (e.g. a callable
                that cannot be re-imported, or `num_workers`).
            trusted_modules: modules (packages, e.g. `["mypkg"]`) the checkpoint's classes
                and functions may be imported from, besides rlfleet, gymnasium and your own
                modules already imported. Any other recorded name raises `CheckpointError`
                before anything is imported.
            logdir, logger_creator: as for the constructor.
        """
        from rlfleet.checkpoint import trainer_from_checkpoint

        # On the base class the checkpoint names the algorithm; on a subclass it must match.
        algorithm = None if cls._name == Trainer._name else cls._name
        return trainer_from_checkpoint(cls, algorithm, checkpoint_path, config_overrides, trusted_modules,
                                       trainer_base=Trainer, logdir=logdir, logger_creator=logger_creator)

    # --- lifecycle ---------------------------------------------------------------
    def stop(self) -> None:
        """Releases everything the trainer holds: envs, local and remote workers (their
        threads and Ray actors), evaluation workers, log files. Calling it again does
        nothing; each part is released even if another fails (the first error is raised)."""
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        errors: List[Exception] = []
        closers = [getattr(self, "workers", None), getattr(self, "evaluator", None)]
        for closer in [c.stop for c in closers if c is not None] + [self._close_result_logger]:
            try:
                closer()
            except Exception as e:  # release the other parts anyway
                errors.append(e)
        if errors:
            raise errors[0]

    def _close_result_logger(self) -> None:
        result_logger, self._result_logger = getattr(self, "_result_logger", None), None
        if result_logger is not None:
            result_logger.close()

    def cleanup(self) -> None:
        """Tune's name for `stop`."""
        self.stop()

    # --- the rest of RLlib 1.x's Trainer API (kept so its user code runs) -------------------
    @classmethod
    def with_updates(cls, *, name: Optional[str] = None, default_config: Optional[dict] = None,
                     default_policy: Optional[type] = None, validate_config: Optional[Callable[[dict], None]] = None
                     ) -> type:
        """A new trainer class: this one with another name, defaults (merged over this
        class's), default policy class, or an extra config check `validate_config(config)`."""
        attrs: Dict[str, Any] = {"_name": name or cls._name}
        if default_config is not None:
            attrs["_default_config"] = cls.merge_trainer_configs(cls._default_config, default_config, True)
        if default_policy is not None:
            attrs["_policy_class"] = default_policy
        if validate_config is not None:
            def validate_algorithm_config(self, config: dict) -> None:
                cls.validate_algorithm_config(self, config)
                validate_config(config)

            attrs["validate_algorithm_config"] = validate_algorithm_config
        return type(name or cls.__name__, (cls,), attrs)

    @classmethod
    def resource_help(cls, config: dict) -> str:
        """What this trainer asks of a cluster with `config`, and which keys change it."""
        request = cls.default_resource_request(config)
        return (f"{cls._name} needs {request.required_resources()} in {len(request.bundles)} bundles "
                f"(strategy {request.strategy}): the driver (num_cpus_for_driver, num_gpus), then one per "
                "remote worker (num_workers x num_cpus_per_worker / num_gpus_per_worker / "
                "custom_resources_per_worker) and per evaluation worker (evaluation_num_workers).")

    def collect_metrics(self, selected_workers: Optional[List[Any]] = None) -> Dict[str, Any]:
        """Episode statistics of the episodes finished since the last call (all workers, or
        the remote workers `selected_workers`), as in a result dict."""
        episodes, perfs = self.workers.collect_metrics(self.config.get("collect_metrics_timeout"),
                                                       selected_workers=selected_workers)
        result = summarize_episodes(episodes)
        result["sampler_perf"] = merge_perf(perfs)
        return result

    def log_result(self, result: Dict[str, Any]) -> None:
        """Hands `result` to the callbacks' `on_train_result` and the loggers (as `train` does)."""
        self.callbacks.on_train_result(trainer=self, result=result)
        self._result_logger.on_result(result)

    def __repr__(self) -> str:
        return self._name


__all__ = ["Trainer", "WorkerFailureError", "ResourceRequest", "MAX_WORKER_FAILURE_RETRIES"]
