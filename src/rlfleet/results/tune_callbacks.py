"""MLflow and W&B tracking of Tune runs, as Tune callbacks in the driver: one tracker run per
trial, its config as parameters, every result's numbers as metrics, each checkpoint Tune
takes as an artifact, the run closed as finished or failed with its trial.

    from ray import tune
    from rlfleet.results.tune_callbacks import mlflow_callback, wandb_callback

    tuner = tune.Tuner("rlfleet.PPO", param_space={...}, run_config=tune.RunConfig(
        callbacks=[mlflow_callback(tracking_uri="http://127.0.0.1:5000"), wandb_callback(project="sweep")]))

The options are those of `logger_config`'s "mlflow" and "wandb" dicts
(`rlfleet.results.mlflow_tracker.MLFLOW_OPTIONS`, `...wandb_tracker.WANDB_OPTIONS`); the
local stores default to the experiment's folder (MLflow: `<experiment>/mlflow/`, W&B: each
trial's folder). Inside a trial, the trainer's `logger_config` types track it too: use one
way or the other, not both, or each trial is tracked twice.

Ray Tune is imported only when a callback is made (`pip install 'rlfleet[tune]'`).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from rlfleet.results.mlflow_tracker import MLFLOW_OPTIONS, MLflowTracker
from rlfleet.results.trackers import Tracker, check_options, import_tracker, result_step, tracked_metrics, tracked_params
from rlfleet.results.wandb_tracker import WANDB_OPTIONS, WandbTracker, default_mode

_CLASS: Dict[str, type] = {}


def _callback_class() -> type:
    """The Tune `Callback` subclass, made once Tune is imported."""
    if "cls" in _CLASS:
        return _CLASS["cls"]
    from rlfleet.utils.ray_utils import import_ray

    import_ray()  # Ray's own settings (loopback) before Tune imports it
    tune = import_tracker("ray.tune", "tune", "Tracking Tune runs")

    class TrackerCallback(tune.Callback):
        """One `Tracker` per trial (see the module's docstring)."""

        def __init__(self, make: Callable[[str], Tracker]):
            self._make = make
            self._trackers: Dict[str, Tracker] = {}

        def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            tracker = self._make(trial.local_path)
            tracker.start(str(trial), tracked_params(trial.config))
            self._trackers[trial.trial_id] = tracker

        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: Mapping[str, Any],
                            **info: Any) -> None:
            tracker = self._trackers.get(trial.trial_id)
            if tracker is not None:
                tracker.log(tracked_metrics(result), result_step(result))

        def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
            from rlfleet.checkpoint.located import checkpoint_folder

            tracker = self._trackers.get(trial.trial_id)
            if tracker is not None and tracker.options.get("log_checkpoints", True):
                tracker.log_checkpoint(checkpoint_folder(checkpoint))

        def _finish(self, trial: Any, failed: bool) -> None:
            tracker = self._trackers.pop(trial.trial_id, None)
            if tracker is not None:
                tracker.finish(failed=failed)

        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self._finish(trial, failed=False)

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self._finish(trial, failed=True)

        def on_experiment_end(self, trials: list, **info: Any) -> None:
            for trial in trials:
                self._finish(trial, failed=False)

    _CLASS["cls"] = TrackerCallback
    return TrackerCallback


def mlflow_callback(**options: Any) -> Any:
    """A Tune callback tracking each trial as an MLflow run.

    Args:
        options: `MLFLOW_OPTIONS` (tracking_uri, experiment_name, run_name, tags).

    Raises:
        ValueError: an unknown option.
        ImportError: mlflow or Ray Tune is missing (naming the extra).
    """
    checked = check_options(options, MLFLOW_OPTIONS, "mlflow_callback")
    import_tracker("mlflow", "mlflow", "mlflow_callback")
    return _callback_class()(lambda trial_dir: MLflowTracker(checked, trial_dir))


def wandb_callback(**options: Any) -> Any:
    """A Tune callback tracking each trial as a W&B run (offline unless logged in).

    Args:
        options: `WANDB_OPTIONS` (project, entity, group, name, tags, mode, dir).

    Raises:
        ValueError: an unknown option or mode.
        ImportError: wandb or Ray Tune is missing (naming the extra).
    """
    checked = check_options(options, WANDB_OPTIONS, "wandb_callback")
    import_tracker("wandb", "wandb", "wandb_callback")
    default_mode(checked)
    return _callback_class()(lambda trial_dir: WandbTracker(checked, trial_dir))


__all__ = ["mlflow_callback", "wandb_callback"]
