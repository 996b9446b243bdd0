"""Ray Tune adapter: run rlfleet trainers as Tune trials.

    import rlfleet.tune
    from ray import tune

    rlfleet.tune.register()                       # "rlfleet.PPO", "rlfleet.DQN", ...
    tune.run("rlfleet.PPO", config={"env": "CartPole-v1", "lr": tune.grid_search([1e-3, 3e-4])},
             stop={"training_iteration": 10}, storage_path="~/rlfleet_results")

Ray 2.x's `Tuner` takes the same trainables, and rlfleet's builders as `param_space`, with
the algorithm's name as RLlib 2.x's docs write it:

    config = PPOConfig().environment("CartPole-v1").training(lr=tune.grid_search([1e-3, 3e-4]))
    tuner = tune.Tuner("PPO", param_space=config,         # or config.algo_class, or "rlfleet.PPO"
                       run_config=tune.RunConfig(stop={"env_runners/episode_return_mean": 150}))
    best = tuner.fit().get_best_result(metric="env_runners/episode_return_mean", mode="max")
    algo = Algorithm.from_checkpoint(best.checkpoint)

Given with an rlfleet builder, "PPO" is rlfleet's PPO: the builder registers rlfleet's trainable
under that name in Tune's registry when Tuner converts it (`route_algorithm_name`), before Ray
looks the name up (so Ray never imports RLlib to find its own). With a plain dict
`param_space`, pass `config.algo_class` or "rlfleet.PPO" (after `register()`).

In RLlib 1.x the `Trainer` *is* a Tune `Trainable`; here it is standalone (so that
`import rlfleet` imports neither Ray nor Tune) and `trainable(...)` wraps it:

- `setup` builds the trainer in the trial's folder; `step` is one `train()`; `cleanup`
  stops it (its remote workers included); `reset_config` rebuilds it for actor reuse.
- `save_checkpoint` writes rlfleet's own checkpoint format (JSON + safetensors, see
  `rlfleet/checkpoint/`) as `<Tune's checkpoint folder>/checkpoint_<iteration>/`;
  `load_checkpoint` verifies and restores it. No pickle is involved, and that inner folder
  also loads with `Trainer.from_checkpoint` and `rlfleet evaluate`.
- `default_resource_request` is `Trainer.default_resource_request(config)` as a Tune
  `PlacementGroupFactory`: bundle 0 for the trainer, one bundle per remote rollout and
  evaluation worker, with `placement_strategy`. Tune starts the trainer in that placement
  group with child-task capture on, so its remote workers start inside the same group.
- Result files (`result.json`, `progress.csv`, TensorBoard events) are written by Tune's
  own logger callbacks in the trial folder; the trainer adds only the loggers named in
  `logger_config.type`, if any.

Envs given to `rlfleet.register_env` in the driver process are copied into the trainable
when `trainable()` (or `register()`) is called, so register envs first; an env class or a
Gymnasium id needs nothing.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from rlfleet.trainer.resources import ResourceRequest

TUNE_INSTALL_HINT = "pip install 'rlfleet[tune]'"

# Registered Tune names are "rlfleet.<algorithm>".
PREFIX = "rlfleet."


def import_tune():
    """Imports and returns `ray.tune`.

    Raises:
        ImportError: naming the extra to install when Ray Tune (or one of its dependencies)
            is missing.
    """
    import importlib

    try:
        tune = importlib.import_module("ray.tune")
    except ImportError as exc:
        raise ImportError(f"Ray Tune is not installed ({exc}); install it with: {TUNE_INSTALL_HINT}") from exc
    return tune


def tune_available() -> bool:
    """Whether `ray.tune` can be imported (without printing anything)."""
    try:
        import_tune()
    except ImportError:
        return False
    return True


class _NoLogger:
    def on_result(self, result: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _logger_creator(logdir: str):
    """Inside Tune, Tune's callbacks write result.json / progress.csv / TensorBoard events;
    the trainer adds only the loggers its `logger_config.type` names."""
    from rlfleet.results.logger import UnifiedLogger, logger_types

    def create(config: dict) -> Any:
        types = logger_types(config)
        if not types:
            return _NoLogger()
        return UnifiedLogger(config, logdir, loggers=types, write_params=False)

    return create


def _trainer_class(algo: Union[str, type]) -> type:
    from rlfleet.registry import get_trainer_class
    from rlfleet.trainer import Trainer

    if isinstance(algo, str):
        return get_trainer_class(algo[len(PREFIX):] if algo.startswith(PREFIX) else algo)
    if isinstance(algo, type) and issubclass(algo, Trainer):
        return algo
    raise TypeError(f"rlfleet.tune.trainable: expected an algorithm name such as 'PPO' or a Trainer subclass, "
                    f"got {algo!r}")


def accept_builders() -> None:
    """Lets `tune.Tuner(..., param_space=PPOConfig()...)` (and `tune.run(..., config=...)`) take
    rlfleet's builders, and routes an algorithm's name given with one to rlfleet's trainable.

    Tuner turns a `param_space` into a dict with `to_dict()` only for instances of
    `ray.tune.tune._Config` (the ABC RLlib's AlgorithmConfig derives from; see
    `TunerInternal.param_space` in ray/tune/impl/tuner_internal.py). Registering the builder
    as a virtual subclass keeps the builder itself free of Ray. The builder calls this when it
    is made or changed in a process that has imported `ray.tune` (a 2.x script imports it
    first); `trainable()` calls it too. Where a Ray release lacks that ABC,
    `param_space=config.to_dict()` with `config.algo_class` is what to pass.
    """
    try:
        from ray.tune.tune import _Config
    except ImportError:
        return
    from rlfleet.config.builder import TO_DICT_CHECKS, AlgorithmConfig

    _Config.register(AlgorithmConfig)
    if route_algorithm_name not in TO_DICT_CHECKS:
        TO_DICT_CHECKS.append(route_algorithm_name)


# Where Ray calls `to_dict()` on a `_Config` before it resolves the trainable's name: the
# frame's function, and the local holding the trainable (TunerInternal's `self._trainable`,
# tune.run's `run_or_experiment`).
_TO_DICT_CALLERS = {("ray.tune.impl.tuner_internal", "param_space"): "self",
                    ("ray.tune.tune", "run"): "run_or_experiment"}


def _trainable_name(caller: Any) -> Any:
    local = _TO_DICT_CALLERS.get((caller.f_globals.get("__name__"), caller.f_code.co_name))
    value = caller.f_locals.get(local) if local else None
    if local == "self":
        from ray.tune.impl.tuner_internal import TunerInternal

        return value.trainable if isinstance(value, TunerInternal) else None
    return value


def route_algorithm_name(builder: Any, caller: Any) -> None:
    """Makes `tune.Tuner("PPO", param_space=PPOConfig()...)`, the line as RLlib 2.x's docs
    write it, run rlfleet's PPO: registers rlfleet's trainable in Tune's registry under the
    name given ("PPO", or "rlfleet.PPO").

    Called by the builder's `to_dict()` with its caller's frame. Tuner and tune.run call
    `to_dict()` on their config before they look the trainable's name up (at `fit()` /
    inside `run`), so Ray's lookup finds rlfleet's class, and never imports RLlib to find
    its own. Only a name given with an rlfleet builder is routed: a dict `param_space` says
    nothing about whose algorithm it is (pass `config.algo_class` or "rlfleet.PPO" with one).
    A name rlfleet does not have (a trainable of the user's own) passes through, as does
    any other caller of `to_dict()`.

    Raises:
        ValueError: the name is another rlfleet algorithm than the builder's.
    """
    from rlfleet.registry import list_algorithms

    name = _trainable_name(caller)
    if not isinstance(name, str):
        return
    algo = name[len(PREFIX):] if name.startswith(PREFIX) else name
    if algo not in list_algorithms():
        return
    if algo != builder.algo_name:
        raise ValueError(f"{name!r} was given with a {type(builder).__name__} ({builder.algo_name}'s config): "
                         f"pass {builder.algo_name!r} as the trainable, or build the config with "
                         f"{algo}'s builder")
    import_tune().register_trainable(name, trainable(algo))


def placement_group_factory(request: ResourceRequest) -> Any:
    """`request` (a trainer's `default_resource_request`) as a Tune `PlacementGroupFactory`."""
    from rlfleet.utils.ray_utils import import_ray

    import_ray()  # Ray's own settings (loopback) before Tune imports it
    tune = import_tune()
    return tune.PlacementGroupFactory(request.bundles, strategy=request.strategy)


def trainable(algo: Union[str, type]) -> type:
    """A Tune `Trainable` class running the trainer `algo`.

    Args:
        algo: an algorithm name ("PPO", or "rlfleet.PPO") or a `Trainer` subclass.

    Returns:
        A subclass of `ray.tune.Trainable`, named `rlfleet.<Algo>`.

    Raises:
        ImportError: Ray Tune is not installed (names `pip install 'rlfleet[tune]'`).
    """
    tune = import_tune()
    from rlfleet.checkpoint import list_checkpoints
    from rlfleet.rollout.name_registries import NameRegistries

    trainer_cls = _trainer_class(algo)
    accept_builders()
    # Tune ships this class to its trial actors by value: the registered names (envs, custom
    # models, action distributions, preprocessors) go with it.
    names = NameRegistries.capture()

    class RlfleetTrainable(tune.Trainable):
        _trainer_class = trainer_cls
        _name_registries = names

        @classmethod
        def default_resource_request(cls, config: Dict[str, Any]):
            return placement_group_factory(cls._trainer_class.default_resource_request(config))

        def setup(self, config: Dict[str, Any]) -> None:
            self._name_registries.install()
            self.trainer = self._trainer_class(config=config, logdir=self.logdir,
                                               logger_creator=_logger_creator(self.logdir))

        def step(self) -> Dict[str, Any]:
            result = dict(self.trainer.train())
            # Tune adds its own `done`, and counts `time_total_s` itself (also across restores).
            result.pop("done", None)
            return result

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            self.trainer.save(checkpoint_dir)
            return None

        def load_checkpoint(self, checkpoint: Any) -> None:
            path = str(checkpoint)
            found = list_checkpoints(path)
            if not found:
                raise ValueError(f"{path!r} holds no rlfleet checkpoint (a checkpoint_<n>/ folder with a "
                                 f"manifest.json); it was not written by rlfleet.tune")
            self.trainer.restore(found[-1])

        def reset_config(self, new_config: Dict[str, Any]) -> bool:
            # Actor reuse: a fresh trainer for the new config in the new trial folder.
            self.trainer.stop()
            self.setup(new_config)
            self.config = new_config
            return True

        def cleanup(self) -> None:
            trainer = getattr(self, "trainer", None)
            if trainer is not None:
                trainer.stop()

        def log_result(self, result: Dict[str, Any]) -> None:
            # The trainer already ran its callbacks and loggers on this result in train().
            pass

    name = f"{PREFIX}{trainer_cls._name}"
    RlfleetTrainable.__name__ = name
    RlfleetTrainable.__qualname__ = name
    return RlfleetTrainable


def _tracker_callback(trackers: Any) -> Any:
    """`trackers` (a `rlfleet.results.trial_trackers.TrialTrackers`) as a Tune `Callback`."""
    tune = import_tune()

    class TrackerCallback(tune.Callback):
        def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            trackers.start(trial.trial_id, str(trial), trial.local_path, trial.config)

        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: Dict[str, Any],
                            **info: Any) -> None:
            trackers.result(trial.trial_id, result)

        def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
            trackers.checkpoint(trial.trial_id, checkpoint)

        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            trackers.finish(trial.trial_id)

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            trackers.finish(trial.trial_id, failed=True)

        def on_experiment_end(self, trials: list, **info: Any) -> None:
            trackers.finish_all()

    return TrackerCallback()


def mlflow_callback(**options: Any) -> Any:
    """A Tune callback tracking each trial as an MLflow run, from the driver
    (`tune.RunConfig(callbacks=[mlflow_callback(experiment_name="sweep")])`).

    Args:
        options: the `logger_config` "mlflow" options (`rlfleet.results.mlflow_tracker.MLFLOW_OPTIONS`).

    Raises:
        ValueError: an unknown option.
        ModuleNotFoundError: mlflow is missing (`pip install 'rlfleet[mlflow]'`).
        ImportError: Ray Tune is missing.
    """
    from rlfleet.results.trial_trackers import mlflow_trials

    return _tracker_callback(mlflow_trials(**options))


def wandb_callback(**options: Any) -> Any:
    """A Tune callback tracking each trial as a W&B run (offline unless logged in), from the
    driver (`tune.RunConfig(callbacks=[wandb_callback(project="sweep")])`).

    Args:
        options: the `logger_config` "wandb" options (`rlfleet.results.wandb_tracker.WANDB_OPTIONS`).

    Raises:
        ValueError: an unknown option or mode.
        ModuleNotFoundError: wandb is missing (`pip install 'rlfleet[wandb]'`).
        ImportError: Ray Tune is missing.
    """
    from rlfleet.results.trial_trackers import wandb_trials

    return _tracker_callback(wandb_trials(**options))


def register(*algorithms: str) -> Dict[str, type]:
    """Registers rlfleet's algorithms with Tune as "rlfleet.<name>" ("rlfleet.PPO", ...), so
    that `tune.run("rlfleet.PPO", ...)` and `tune.Tuner("rlfleet.PPO", ...)` find them.

    Call it again after `rlfleet.register_env` to ship envs registered since.

    Args:
        algorithms: names to register (default: every algorithm of `rlfleet list`).

    Returns:
        `{tune name: trainable class}`.
    """
    tune = import_tune()
    from rlfleet.registry import list_algorithms

    out = {}
    for algo in algorithms or list_algorithms():
        cls = trainable(algo)
        tune.register_trainable(cls.__name__, cls)
        out[cls.__name__] = cls
    return out


def tune_name(algo: str) -> str:
    """The Tune name of an rlfleet algorithm ("PPO" -> "rlfleet.PPO")."""
    return algo if algo.startswith(PREFIX) else PREFIX + algo


# --- YAML search spaces ---------------------------------------------------------------
# `{name: args}` mappings in an experiment's config that stand for a Tune search space:
# `lr: {grid_search: [0.001, 0.0003]}`, `gamma: {uniform: [0.9, 0.99]}`, `seed: {randint: [0, 100]}`.
SEARCH_SPACES = ("grid_search", "choice", "uniform", "quniform", "loguniform", "qloguniform", "randn",
                 "qrandn", "randint", "qrandint", "lograndint", "qlograndint", "sample_from")


def find_search_space(config: Any, path: str = "") -> Optional[str]:
    """The key path ("model/fcnet_hiddens") of the first search-space entry in `config`
    (without importing Tune); None when there is none."""
    if isinstance(config, dict):
        if len(config) == 1 and next(iter(config)) in SEARCH_SPACES:
            return path or "<config>"
        for key, value in config.items():
            found = find_search_space(value, f"{path}/{key}" if path else str(key))
            if found:
                return found
    return None


def resolve_search_spaces(config: Any, path: str = "") -> Any:
    """`config` with every `{name: args}` search-space entry replaced by `tune.<name>(*args)`
    (`grid_search` keeps Tune's own `{"grid_search": [...]}` form).

    Raises:
        ValueError: naming the key path when an entry's arguments are not a list.
    """
    if isinstance(config, dict):
        if len(config) == 1 and next(iter(config)) in SEARCH_SPACES:
            (name, args), = config.items()
            if not isinstance(args, list):
                raise ValueError(f"config key {path or '<config>'!r}: `{name}` takes a list of arguments, "
                                 f"e.g. {{{name}: [0.001, 0.0003]}}, got {args!r}")
            if name == "grid_search":
                return {"grid_search": list(args)}
            if name == "choice":
                return getattr(import_tune(), name)(args)
            if name == "sample_from":
                raise ValueError(f"config key {path!r}: `sample_from` needs a Python function; use it from "
                                 f"Python (tune.sample_from), not from YAML")
            return getattr(import_tune(), name)(*args)
        return {k: resolve_search_spaces(v, f"{path}/{k}" if path else str(k)) for k, v in config.items()}
    return config


def _flat_stop(stop: Any) -> Any:
    """Stop criteria as Tune takes them: flat "/" names (a nested `{"env_runners":
    {"episode_return_mean": 150}}`, as RLlib 2.x results nest, becomes
    "env_runners/episode_return_mean"), as `rlfleet train` reads them. A Tune `Stopper` or
    function passes through."""
    from collections.abc import Mapping

    from rlfleet.results.result_values import flatten_dict

    return (flatten_dict(stop) if isinstance(stop, Mapping) else stop) or None


def run_experiments(experiments: Dict[str, Dict[str, Any]], *, verbose: int = 1) -> list:
    """Runs `rlfleet train -f`-style experiments through Tune (`tune.run_experiments`), on a
    Ray started as rlfleet starts one (an existing one, `RAY_ADDRESS`, else local on 127.0.0.1).

    Args:
        experiments: `{name: {"run": "PPO" or a Trainer class, "config": {...}, "stop": {...} (result
            names, flat with "/" or nested; RLlib 2.x's "env_runners/..." names too),
            "num_samples": n, "checkpoint_freq": n, "checkpoint_at_end": bool,
            "keep_checkpoints_num": n, "local_dir": parent folder}}`; search spaces in
            `config` may be Tune objects or their YAML form (`{grid_search: [...]}`, `{choice:
            [...]}`, `{uniform: [low, high]}`, ...).
        verbose: Tune's verbosity (0 silent, 1 status table, 2 every result).

    Returns:
        The Tune trials, experiment after experiment.
    """
    tune = import_tune()
    from rlfleet.results.logger import default_results_dir
    from rlfleet.utils.ray_utils import init_ray

    init_ray()
    specs = []
    for name, spec in experiments.items():
        cls = trainable(spec["run"])
        tune.register_trainable(cls.__name__, cls)
        keep = spec.get("keep_checkpoints_num")
        specs.append(tune.Experiment(
            name, cls.__name__, config=resolve_search_spaces(spec.get("config") or {}),
            stop=_flat_stop(spec.get("stop")), num_samples=int(spec.get("num_samples") or 1),
            storage_path=os.path.abspath(os.path.expanduser(spec.get("local_dir") or default_results_dir())),
            checkpoint_config={"checkpoint_frequency": int(spec.get("checkpoint_freq") or 0),
                               "checkpoint_at_end": bool(spec.get("checkpoint_at_end")),
                               **({"num_to_keep": int(keep)} if keep else {})}))
    return tune.run_experiments(specs, verbose=verbose)


__all__ = ["TUNE_INSTALL_HINT", "accept_builders", "find_search_space", "import_tune", "mlflow_callback", "register",
           "resolve_search_spaces", "route_algorithm_name", "run_experiments", "trainable", "tune_available",
           "tune_name", "wandb_callback"]
