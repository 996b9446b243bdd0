"""Trainer: builds the workers from one config and runs train() / evaluate() iterations.

An algorithm subclasses `Trainer`, sets `_name`, `_default_config` and `_policy_class`,
and writes `training_step()` as straight-line code (sample, learn, sync).
"""
from __future__ import annotations

import concurrent.futures
import copy
import logging
import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.config import (
    ALLOW_UNKNOWN_SUBKEYS,
    COMMON_CONFIG,
    DEFAULT_POLICY_ID,
    OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
    merge_configs,
    validate_config,
)
from rlfleet.env.registry import resolve_env
from rlfleet.env.wrappers.atari import with_atari_preprocessing
from rlfleet.logger import UnifiedLogger, make_logdir
from rlfleet.rollout.metrics import merge_perf, summarize_episodes
from rlfleet.rollout.worker_set import WorkerSet
from rlfleet.utils.deep_update import merge_dicts
from rlfleet.utils.filters import FilterManager
from rlfleet.utils.ray_utils import is_worker_failure

logger = logging.getLogger(__name__)

# How often one train() call recovers from remote worker failures before giving up (as
# the reference).
MAX_WORKER_FAILURE_RETRIES = 3


class WorkerFailureError(RuntimeError):
    """A remote worker died (or raised) during train() and the config does not allow
    going on without it."""


@dataclass
class ResourceRequest:
    """The resources one trainer asks for: one bundle for the driver (the trainer process
    and its local worker), one per remote worker, one per evaluation worker.

    Attributes:
        bundles: `{"CPU": n, "GPU": n, <custom resource>: n}` per bundle; bundle 0 is the driver.
        strategy: the placement-group strategy (`placement_strategy`: PACK, SPREAD, ...).
    """

    bundles: List[Dict[str, float]] = field(default_factory=list)
    strategy: str = "PACK"

    def required_resources(self) -> Dict[str, float]:
        """The bundles summed per resource."""
        total: Dict[str, float] = {}
        for bundle in self.bundles:
            for name, amount in bundle.items():
                total[name] = total.get(name, 0) + amount
        return total

    def to_placement_group_factory(self):
        """The same request as a Ray Tune `PlacementGroupFactory` (needs `ray[tune]`)."""
        from rlfleet.utils.ray_utils import import_ray

        import_ray()
        from ray.tune import PlacementGroupFactory

        return PlacementGroupFactory(self.bundles, strategy=self.strategy)


def _limit_torch_threads(num_cpus: float) -> None:
    """Caps torch's intra-op threads at the CPUs the driver was given.

    The nets RL trains are small: extra threads buy nothing on an idle machine (PPO on
    CartPole takes the same time with 1 or 2) and cost 10-20x on a loaded one, where
    they wait on each other. An explicit `OMP_NUM_THREADS` wins, as Ray's does for
    remote workers.
    """
    if "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    torch.set_num_threads(max(1, int(math.ceil(num_cpus))))


def _sys_usage() -> Dict[str, float]:
    try:
        import psutil
    except ImportError:  # optional: `perf` is simply left out
        return {}
    return {"cpu_util_percent": psutil.cpu_percent(), "ram_util_percent": psutil.virtual_memory().percent}


def _evaluation_episodes(worker, num_episodes: int):
    """Runs on an evaluation worker: `num_episodes` episodes, their metrics (only theirs)."""
    episodes = worker.sample_episodes(num_episodes)
    worker.get_metrics()  # drop: they are `episodes` already
    return episodes


class Trainer:
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
    _allow_unknown_configs = False
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
        config = dict(config or {})
        self._env_id, self.env_creator = resolve_env(env if env is not None else config.get("env"))
        if self._env_id is not None:
            config["env"] = self._env_id
        self.raw_user_config = config
        self.config = self.merge_trainer_configs(self._default_config, config, self._allow_unknown_configs)
        self._validate_config(self.config, trainer_obj_or_none=self)
        # Atari image envs get the preprocessing `preprocessor_pref` asks for, wherever the
        # trainer's env creator is used (workers, evaluation); wrapping twice is a no-op.
        self.env_creator = with_atari_preprocessing(self.env_creator, self.config)
        if self._policy_class is None:
            raise TypeError(f"{type(self).__name__} must set `_policy_class`")

        for key, value in (self.config.get("extra_python_environs_for_driver") or {}).items():
            os.environ[str(key)] = str(value)
        _limit_torch_threads(self.config["num_cpus_for_driver"])
        if self.config.get("log_level"):
            level = self.config["log_level"]
            logging.getLogger("rlfleet").setLevel("WARNING" if level == "WARN" else level)
        self.callbacks = self.config["callbacks"]()

        self.iteration = 0
        self._time_total = 0.0
        self._episodes_total = 0
        self.counters: Dict[str, int] = {
            "num_env_steps_sampled": 0,
            "num_env_steps_trained": 0,
            "num_agent_steps_sampled": 0,
            "num_agent_steps_trained": 0,
        }
        self._episode_history: deque = deque(maxlen=int(self.config["metrics_smoothing_episodes"]))

        self.logdir = logdir or make_logdir(self._name, self._env_id)
        os.makedirs(self.logdir, exist_ok=True)
        if self.config["multiagent"].get("policy_map_cache") is None:  # None: under the results folder
            self.config["multiagent"]["policy_map_cache"] = os.path.join(self.logdir, "policy_map_cache")
        self._result_logger = (logger_creator or (lambda cfg: UnifiedLogger(cfg, self.logdir)))(self.config)

        self.workers = self._make_workers(
            env_creator=self.env_creator, policy_class=self._policy_class,
            config=self.config, num_workers=self.config["num_workers"],
        )
        # add_policy / remove_policy calls, in order, replayed on workers made later
        # (recreated after a failure, evaluation workers made lazily).
        self._policy_changes: List[Tuple[str, Dict[str, Any]]] = []
        self.evaluation_workers: Optional[WorkerSet] = None
        if self.config.get("evaluation_interval"):
            self.evaluation_workers = self._make_evaluation_workers()
        self.setup(self.config)
        self.callbacks.on_trainer_init(trainer=self)

    # --- config ------------------------------------------------------------------
    @classmethod
    def merge_trainer_configs(cls, config1: dict, config2: Optional[dict],
                              _allow_unknown_configs: Optional[bool] = None) -> dict:
        """`config1` deep-updated with `config2` under the reference's rules (see config.py)."""
        if _allow_unknown_configs is None:
            _allow_unknown_configs = cls._allow_unknown_configs
        return merge_configs(config1, config2, _allow_unknown_configs, cls._allow_unknown_subkeys,
                             cls._override_all_subkeys_if_type_changes)

    @staticmethod
    def _validate_config(config: dict, trainer_obj_or_none: Optional["Trainer"] = None) -> None:
        """Validates and normalises `config` in place; subclasses add their own checks."""
        validate_config(config)
        if trainer_obj_or_none is not None:
            trainer_obj_or_none.validate_algorithm_config(config)

    def validate_algorithm_config(self, config: dict) -> None:
        """Algorithm-specific value checks; raise ValueError naming key, value and fix."""

    def setup(self, config: dict) -> None:
        """Algorithm-specific initialisation after the workers exist."""

    def _make_workers(self, *, env_creator, policy_class, config, num_workers) -> WorkerSet:
        return WorkerSet(env_creator=env_creator, policy_class=policy_class, trainer_config=config,
                         num_workers=num_workers, logdir=self.logdir)

    @classmethod
    def default_resource_request(cls, config: dict) -> ResourceRequest:
        """The resources this trainer needs with `config` (the reference's bundles).

        Bundle 0 is the driver (`num_cpus_for_driver`, `num_gpus`), then one bundle per remote
        worker (`num_cpus_per_worker`, `num_gpus_per_worker`, `custom_resources_per_worker`),
        then one per evaluation worker (the evaluation config's per-worker resources) when
        evaluation is on. Tune reserves these as one placement group (`placement_strategy`).

        Args:
            config: a (partial) config; missing keys take the algorithm's defaults.
        """
        cf = dict(cls._default_config, **(config or {}))
        eval_cf = cf.get("evaluation_config") or {}

        def worker_bundle(c: dict) -> Dict[str, float]:
            bundle = {"CPU": c.get("num_cpus_per_worker", cf["num_cpus_per_worker"]),
                      "GPU": c.get("num_gpus_per_worker", cf["num_gpus_per_worker"])}
            bundle.update(c.get("custom_resources_per_worker", cf.get("custom_resources_per_worker")) or {})
            return bundle

        bundles = [{"CPU": cf["num_cpus_for_driver"], "GPU": cf["num_gpus"]}]
        bundles += [worker_bundle(cf) for _ in range(int(cf["num_workers"]))]
        # Evaluation workers exist when evaluation is on (evaluation workers alone turn
        # it on: validate_config sets evaluation_interval to 1 then).
        n_eval = int(cf.get("evaluation_num_workers") or 0)
        if cf.get("evaluation_interval") or n_eval:
            bundles += [worker_bundle(eval_cf) for _ in range(n_eval)]
        return ResourceRequest(bundles=bundles, strategy=cf.get("placement_strategy") or "PACK")

    def _make_evaluation_workers(self) -> WorkerSet:
        extra = copy.deepcopy(self.config["evaluation_config"])
        if extra.get("in_evaluation") is False:
            raise ValueError("`evaluation_config.in_evaluation` cannot be False: evaluation workers always run "
                             "with in_evaluation=True")
        eval_config = merge_dicts(self.config, extra)
        validate_config(eval_config)
        # Evaluation always runs whole episodes, with the weights it was given (no
        # background sampling thread).
        eval_config.update({"batch_mode": "complete_episodes", "in_evaluation": True, "sample_async": False})
        workers = self._make_workers(env_creator=self.env_creator, policy_class=self._policy_class,
                                     config=eval_config, num_workers=self.config["evaluation_num_workers"])
        if self._policy_changes:
            workers.foreach_worker(self._policy_changes_replayer())
        return workers

    def _policy_changes_replayer(self) -> Callable[[Any], None]:
        """`fn(worker)` that applies this trainer's run-time add/remove_policy calls, in order."""
        changes = list(self._policy_changes)

        def replay(worker) -> None:
            for op, kwargs in changes:
                if op == "add":
                    worker.add_policy(**kwargs)
                else:
                    worker.remove_policy(**kwargs)

        return replay

    # --- the loop ----------------------------------------------------------------
    def training_step(self) -> Dict[str, Any]:
        """One round of sampling and learning; returns the learner info per policy."""
        raise NotImplementedError  # abstract

    def train(self) -> Dict[str, Any]:
        """Runs training steps for one iteration (at least `min_iter_time_s` seconds and
        `timesteps_per_iteration` env steps) and returns the result dict.

        A remote worker that dies (or raises) during the iteration is handled as the
        reference does, up to `MAX_WORKER_FAILURE_RETRIES` times per call: with
        `recreate_failed_workers` it is replaced by a new worker with the current weights
        and filters; with `ignore_worker_failures` it is dropped and training goes on with
        the others; with neither, `WorkerFailureError` is raised.
        """
        start = time.time()
        result = None
        for attempt in range(1 + MAX_WORKER_FAILURE_RETRIES):
            iteration_before = self.iteration
            try:
                result = self._train_iteration(start)
                break
            except Exception as e:
                if not is_worker_failure(e):
                    raise
                self.iteration = iteration_before
                if not (self.config["ignore_worker_failures"] or self.config["recreate_failed_workers"]):
                    raise WorkerFailureError(
                        f"A remote worker failed during train(): {e}\nTo go on without it set "
                        "'ignore_worker_failures': True; to replace it with a new worker set "
                        "'recreate_failed_workers': True."
                    ) from e
                logger.warning("A remote worker failed during train() (attempt %d of %d); recovering: %s",
                               attempt + 1, 1 + MAX_WORKER_FAILURE_RETRIES, str(e).splitlines()[0])
                self._try_recover()
        if result is None:
            raise WorkerFailureError(f"train() failed {1 + MAX_WORKER_FAILURE_RETRIES} times in a row because "
                                     "remote workers kept failing; see the warnings above")
        took = time.time() - start
        self._time_total += took
        result["time_this_iter_s"] = took
        result["time_total_s"] = self._time_total
        self.callbacks.on_train_result(trainer=self, result=result)
        self._result_logger.on_result(result)
        return result

    def _train_iteration(self, start: float) -> Dict[str, Any]:
        """One iteration: training steps (beside an evaluation thread when
        `evaluation_parallel_to_training`), filter sync, metrics, evaluation."""
        interval = self.config.get("evaluation_interval")
        evaluate_now = bool(interval) and (self.iteration + 1) % interval == 0
        if evaluate_now and self.config.get("evaluation_parallel_to_training"):
            # Weights and filters go to the evaluation workers before learning starts, so the
            # thread never reads them while training_step changes them.
            self._sync_evaluation_workers()
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlfleet-evaluation") as pool:
                future = pool.submit(self._run_evaluation)
                learner_info, steps = self._run_training_steps(start)
                evaluation = future.result()
        else:
            learner_info, steps = self._run_training_steps(start)
            evaluation = None
        self._sync_filters_if_needed(self.workers)
        self.iteration += 1
        result = self._compile_result(learner_info, steps)
        if evaluate_now:
            result.update(evaluation if evaluation is not None else self.evaluate())
        return result

    def _run_training_steps(self, start: float):
        sampled_before = self.counters["num_env_steps_sampled"]
        min_time = float(self.config.get("min_iter_time_s") or 0)
        min_steps = int(self.config.get("timesteps_per_iteration") or 0)
        while True:
            learner_info = self.training_step()
            steps = self.counters["num_env_steps_sampled"] - sampled_before
            if time.time() - start >= min_time and steps >= min_steps:
                return learner_info, steps

    def _sync_filters_if_needed(self, workers: WorkerSet) -> None:
        """Merges the remote workers' filter buffers into the local filters and, with
        `synchronize_filters`, sends the merged filters back (the reference's FilterManager)."""
        if self.config.get("observation_filter", "NoFilter") != "NoFilter" and workers.remote_workers():
            FilterManager.synchronize_remote(workers.local_worker().filters, workers.remote_workers(),
                                             update_remote=self.config["synchronize_filters"])

    def _try_recover(self) -> None:
        """Health-checks the remote workers (training and evaluation), drops the failed ones
        and, with `recreate_failed_workers`, starts replacements with the current weights
        and filters. Raises when no healthy remote worker is left."""
        local = self.workers.local_worker()
        for name, worker_set in (("rollout", self.workers), ("evaluation", self.evaluation_workers)):
            if worker_set is None or not worker_set.remote_workers():
                continue
            failed = worker_set.remove_unhealthy_workers()
            if not failed:
                continue
            if self.config["recreate_failed_workers"]:
                logger.warning("Recreating %s worker(s) %s", name, failed)
                prepare = self._policy_changes_replayer() if self._policy_changes else None
                worker_set.recreate_workers(failed, from_worker=local, global_vars=self._global_vars(),
                                            prepare=prepare)
            elif not worker_set.remote_workers():
                raise WorkerFailureError(
                    f"No healthy remote {name} worker is left (worker(s) {failed} failed); cannot continue. "
                    "Set 'recreate_failed_workers': True to replace failed workers."
                )

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        new_episodes, perfs = self.workers.collect_metrics(self.config.get("collect_metrics_timeout"))
        self._episodes_total += len(new_episodes)
        self._episode_history.extend(new_episodes)
        result = summarize_episodes(list(self._episode_history), new_episodes=len(new_episodes))
        now = datetime.now()
        result.update(
            episodes_total=self._episodes_total,
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
            perf = _sys_usage()
            if perf:
                result["perf"] = perf
        return result

    def evaluate(self) -> Dict[str, Any]:
        """Runs `evaluation_num_episodes` episodes under `evaluation_config` with the
        current weights and filters; returns `{"evaluation": metrics}`.

        With `evaluation_num_workers > 0` the episodes are shared out among the remote
        evaluation workers, which run them in parallel; else the evaluation worker set's
        local worker runs them.
        """
        self._sync_evaluation_workers()
        return self._run_evaluation()

    def _sync_evaluation_workers(self) -> None:
        """The evaluation workers get the current weights (one `ray.put`) and filters."""
        if self.evaluation_workers is None:
            self.evaluation_workers = self._make_evaluation_workers()
        local = self.workers.local_worker()
        self.evaluation_workers.sync_weights(from_worker=local)
        self.evaluation_workers.sync_filters(local.get_filters())

    def _run_evaluation(self) -> Dict[str, Any]:
        if self.config.get("custom_eval_function"):
            metrics = self.config["custom_eval_function"](self, self.evaluation_workers)
            if not metrics or not isinstance(metrics, dict):
                raise ValueError(f"`custom_eval_function` must return a non-empty dict of metrics, got {metrics!r}")
            return {"evaluation": metrics}
        num_episodes = int(self.config["evaluation_num_episodes"])
        remote = self.evaluation_workers.remote_workers()
        if not remote:
            eval_worker = self.evaluation_workers.local_worker()
            episodes = eval_worker.sample_episodes(num_episodes)
            eval_worker.get_metrics()  # drop: they are `episodes` already
            return {"evaluation": summarize_episodes(episodes)}
        # Share the episodes out (the first workers take one more when they do not divide
        # evenly); each worker runs its share to the end, all in parallel.
        from rlfleet.utils.ray_utils import import_ray

        ray = import_ray()
        per_worker = [num_episodes // len(remote) + (i < num_episodes % len(remote)) for i in range(len(remote))]
        refs = [w.apply.remote(_evaluation_episodes, n) for w, n in zip(remote, per_worker) if n > 0]
        episodes = [e for eps in ray.get(refs) for e in eps]
        return {"evaluation": summarize_episodes(episodes)}

    # --- acting ------------------------------------------------------------------
    def compute_single_action(
        self,
        observation,
        state: Optional[List[Any]] = None,
        prev_action=None,
        prev_reward: Optional[float] = None,
        info: Optional[dict] = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: Optional[bool] = None,
        unsquash_actions: Optional[bool] = None,
        clip_actions: Optional[bool] = None,
    ):
        """The action for one raw env observation (preprocessed and filtered as in sampling).

        Returns:
            The action; or `(action, state_out, extra_fetches)` when `state` is given or
            `full_fetch` is True.
        """
        worker = self.workers.local_worker()
        if policy_id not in worker.policy_map:
            raise KeyError(f"No policy {policy_id!r}; known: {sorted(worker.policy_map)}")
        pp = worker.preprocessors[policy_id]
        pp.check(observation)
        filtered = worker.filters[policy_id](pp.transform(observation), update=False)
        result = self.get_policy(policy_id).compute_single_action(
            filtered, state or [], prev_action, prev_reward, info,
            explore=explore, unsquash_actions=unsquash_actions, clip_actions=clip_actions,
        )
        return result if (state or full_fetch) else result[0]

    def compute_action(self, *args, **kwargs):
        """Deprecated name of `compute_single_action`."""
        logger.warning("compute_action is deprecated; use compute_single_action")
        return self.compute_single_action(*args, **kwargs)

    def compute_actions(
        self,
        observations: Dict[Any, Any],
        state: Optional[Dict[Any, List[Any]]] = None,
        prev_action=None,
        prev_reward=None,
        info=None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: Optional[bool] = None,
        normalize_actions: Optional[bool] = None,
        clip_actions: Optional[bool] = None,
    ):
        """Actions for a dict `{key: raw observation}` in one batched forward pass.

        Returns:
            `{key: action}`; or `(actions, states, extra_fetches)` when `state` is given
            or `full_fetch` is True.
        """
        from rlfleet.utils.spaces import env_actions

        worker = self.workers.local_worker()
        policy = self.get_policy(policy_id)
        pp, filt = worker.preprocessors[policy_id], worker.filters[policy_id]
        keys = list(observations)
        obs_batch = np.stack([filt(pp.transform(observations[k]), update=False) for k in keys])
        state_batches: List[np.ndarray] = []
        if state is not None:
            per_key = [state.get(k, policy.get_initial_state()) for k in keys]
            state_batches = [np.stack(s) for s in zip(*per_key)]
        if isinstance(prev_action, dict):  # {key: action}, as the observations
            from rlfleet.utils.spaces import flatten_action

            prev_action = np.stack([flatten_action(prev_action[k], policy.action_space) for k in keys])
        if isinstance(prev_reward, dict):
            prev_reward = np.asarray([prev_reward[k] for k in keys], np.float32)
        actions, states_out, extra = policy.compute_actions(obs_batch, state_batches, prev_action, prev_reward, info,
                                                            explore=explore)
        if normalize_actions is None:
            normalize_actions = self.config["normalize_actions"]
        if clip_actions is None:
            clip_actions = self.config["clip_actions"]
        actions = env_actions(actions, policy.action_space, bool(normalize_actions), bool(clip_actions))
        out = {k: actions[i] for i, k in enumerate(keys)}
        if state is not None or full_fetch:
            states = {k: [s[i] for s in states_out] for i, k in enumerate(keys)}
            return out, states, extra
        return out

    # --- policies and weights ------------------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID):
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: Optional[List[str]] = None) -> Dict[str, dict]:
        return self.workers.local_worker().get_weights(policies)

    def set_weights(self, weights: Dict[str, dict]) -> None:
        self.workers.local_worker().set_weights(weights)
        self.workers.sync_weights()

    def add_policy(
        self,
        policy_id: str,
        policy_cls: Optional[type] = None,
        *,
        observation_space=None,
        action_space=None,
        config: Optional[dict] = None,
        policy_mapping_fn: Optional[Callable] = None,
        policies_to_train: Optional[List[str]] = None,
    ):
        """Adds a policy to every worker (evaluation workers included) while training goes on.

        Args:
            policy_id: the new policy's id.
            policy_cls: its Policy class (None: this trainer's default policy class).
            observation_space: None: inferred from the env (an agent the mapping sends to it,
                else the env's shared space).
            action_space: likewise.
            config: overrides merged over the trainer config for this policy.
            policy_mapping_fn: the mapping from now on; episodes already running keep the
                one they started with until they end.
            policies_to_train: the new list of policies to train (None: unchanged, plus the
                new policy when all policies train).

        Returns:
            The new policy (the local worker's copy). Remote copies get its weights.
        """

        def add(worker) -> None:
            worker.add_policy(policy_id, policy_cls, observation_space=observation_space, action_space=action_space,
                              config=config, policy_mapping_fn=policy_mapping_fn,
                              policies_to_train=policies_to_train)

        self.workers.foreach_worker(add)
        if self.evaluation_workers is not None:
            self.evaluation_workers.foreach_worker(add)
        self._policy_changes.append(("add", dict(
            policy_id=policy_id, policy_cls=policy_cls, observation_space=observation_space,
            action_space=action_space, config=config, policy_mapping_fn=policy_mapping_fn,
            policies_to_train=policies_to_train)))
        if self.workers.remote_workers():  # copies on other workers start from the local weights
            self.workers.sync_weights(policies=[policy_id])
        return self.get_policy(policy_id)

    def remove_policy(
        self,
        policy_id: str = DEFAULT_POLICY_ID,
        *,
        policy_mapping_fn: Optional[Callable] = None,
        policies_to_train: Optional[List[str]] = None,
    ) -> None:
        """Removes a policy from every worker (evaluation workers included).

        Args:
            policy_id: the policy to remove.
            policy_mapping_fn: the mapping from now on (episodes running keep theirs and
                finish with the removed policy; its samples are dropped).
            policies_to_train: the new list (None: the old one without `policy_id`).
        """

        def remove(worker) -> None:
            worker.remove_policy(policy_id, policy_mapping_fn=policy_mapping_fn, policies_to_train=policies_to_train)

        self.workers.foreach_worker(remove)
        if self.evaluation_workers is not None:
            self.evaluation_workers.foreach_worker(remove)
        self._policy_changes.append(("remove", dict(policy_id=policy_id, policy_mapping_fn=policy_mapping_fn,
                                                    policies_to_train=policies_to_train)))

    def _global_vars(self) -> Dict[str, Any]:
        return {"timestep": self.counters["num_env_steps_sampled"]}

    # --- checkpoints and export (format: checkpoint.py, policy/export.py) ----------
    def save(self, checkpoint_dir: Optional[str] = None, *, keep_checkpoints_num: Optional[int] = None) -> str:
        """Writes a checkpoint folder `<checkpoint_dir or logdir>/checkpoint_<iteration>/`
        atomically (JSON + safetensors; loading it never runs code).

        Args:
            checkpoint_dir: the parent folder (default: this trainer's `logdir`).
            keep_checkpoints_num: afterwards delete all but this many newest checkpoints there.

        Returns:
            The checkpoint folder's path.
        """
        from rlfleet.checkpoint import save_trainer

        return save_trainer(self, checkpoint_dir, keep_checkpoints_num)

    def restore(self, checkpoint_path: str) -> None:
        """Restores weights, optimizer, filters, RNG states, counters and the iteration from a
        checkpoint of the same algorithm, on every worker; episodes in flight restart.

        Raises:
            CheckpointError: a missing, corrupted, newer-format or non-fitting checkpoint.
        """
        from rlfleet.checkpoint import restore_trainer

        restore_trainer(self, checkpoint_path)

    @classmethod
    def from_checkpoint(cls, checkpoint_path: str, config_overrides: Optional[dict] = None, *,
                        logdir: Optional[str] = None, logger_creator: Optional[Callable[[dict], Any]] = None
                        ) -> "Trainer":
        """Rebuilds the trainer a checkpoint was written by (config from its manifest; classes
        and functions re-imported by qualified name) and restores it.

        Args:
            checkpoint_path: the checkpoint folder.
            config_overrides: config entries replacing the recorded ones (e.g. a callable
                that cannot be re-imported, or `num_workers`).
            logdir, logger_creator: as for the constructor.
        """
        from rlfleet.checkpoint import trainer_from_checkpoint

        return trainer_from_checkpoint(cls, checkpoint_path, config_overrides, logdir=logdir,
                                       logger_creator=logger_creator)

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID,
                            onnx: Optional[int] = None) -> str:
        """TorchScript (`model.pt`), or ONNX (`model.onnx`) with opset `onnx`, of the policy's
        model: preprocessed, filtered observations -> action-distribution inputs (and values)."""
        return self.get_policy(policy_id).export_model(export_dir, onnx)

    def export_policy_checkpoint(self, export_dir: str, filename_prefix: str = "model",
                                 policy_id: str = DEFAULT_POLICY_ID) -> str:
        """The policy's weights alone (`<prefix>.safetensors` + `<prefix>.json`)."""
        return self.get_policy(policy_id).export_checkpoint(export_dir, filename_prefix)

    def import_model(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Loads weights written by `export_policy_checkpoint` and pushes them to all workers."""
        self.get_policy(policy_id).import_model(import_file)
        self.workers.sync_weights()

    def import_policy_model_from_h5(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Not available: rlfleet has no Keras; use `import_model` with exported safetensors weights."""
        self.get_policy(policy_id).import_model_from_h5(import_file)

    def export_model(self, export_formats, export_dir: str) -> Dict[str, str]:
        """Exports the default policy in each of `export_formats` ("model": TorchScript,
        "onnx": ONNX with opset `$ONNX_OPSET` (default 11), "checkpoint": weights) into
        `export_dir/<format>/`; returns `{format: path}`."""
        formats = [export_formats] if isinstance(export_formats, str) else list(export_formats)
        valid = ("checkpoint", "model", "onnx")
        bad = [f for f in formats if f not in valid]
        if bad:
            hint = " (Keras h5 is not supported: use 'checkpoint' and import_model)" if "h5" in bad else ""
            raise ValueError(f"export_model: unknown export format(s) {bad}; valid: {list(valid)}{hint}")
        out: Dict[str, str] = {}
        for fmt in formats:
            target = os.path.join(export_dir, fmt)
            if fmt == "checkpoint":
                out[fmt] = self.export_policy_checkpoint(target)
            elif fmt == "model":
                out[fmt] = self.export_policy_model(target)
            else:
                out[fmt] = self.export_policy_model(target, onnx=int(os.environ.get("ONNX_OPSET", "11")))
        return out

    # --- lifecycle ---------------------------------------------------------------
    def stop(self) -> None:
        """Closes envs, workers and log files."""
        self.workers.stop()
        if self.evaluation_workers is not None:
            self.evaluation_workers.stop()
        if self._result_logger is not None:
            self._result_logger.close()
            self._result_logger = None

    def __repr__(self) -> str:
        return self._name
