"""Tracking Tune trials from the driver (what `rlfleet.tune.mlflow_callback` and
`wandb_callback` run): one tracker run per trial, its config as parameters, every result's
numbers as metrics, each checkpoint Tune takes as an artifact, the run closed as finished or
failed with its trial.

The options are those of `logger_config`'s "mlflow" and "wandb" dicts
(`rlfleet.results.mlflow_tracker.MLFLOW_OPTIONS`, `...wandb_tracker.WANDB_OPTIONS`); the
local stores default to the experiment's folder (MLflow: `<experiment>/mlflow/`, W&B: each
trial's folder). Inside a trial, the trainer's `logger_config` types track it too: use one
way or the other, not both, or each trial is tracked twice.

Nothing here imports Ray: `rlfleet.tune` wraps a `TrialTrackers` in a Tune `Callback`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from rlfleet.results.mlflow_tracker import MLFLOW_OPTIONS, MLflowTracker
from rlfleet.results.result_values import to_jsonable
from rlfleet.results.trackers import Tracker, check_options, import_tracker, result_step, tracked_metrics
from rlfleet.results.wandb_tracker import WANDB_OPTIONS, WandbTracker, default_mode


class TrialTrackers:
    """One `Tracker` per Tune trial, keyed by trial id.

    Args:
        make: builds the tracker of a trial from the trial's folder.
    """

    def __init__(self, make: Callable[[str], Tracker]):
        self._make = make
        self._trackers: Dict[str, Tracker] = {}

    def start(self, trial_id: str, name: str, trial_dir: str, config: Mapping[str, Any]) -> None:
        """Opens the trial's tracker run recording its config."""
        tracker = self._make(trial_dir)
        safe = to_jsonable(dict(config))
        tracker.start(name, safe if isinstance(safe, dict) else {})
        self._trackers[trial_id] = tracker

    def result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        """Logs one of the trial's results."""
        tracker = self._trackers.get(trial_id)
        if tracker is not None:
            tracker.log(tracked_metrics(result), result_step(result))

    def checkpoint(self, trial_id: str, checkpoint: Any) -> None:
        """Uploads the rlfleet checkpoint inside a Tune checkpoint (a `Checkpoint` or a path)."""
        from rlfleet.checkpoint.located import checkpoint_folder

        tracker = self._trackers.get(trial_id)
        if tracker is not None and tracker.options.get("log_checkpoints", True):
            tracker.log_checkpoint(checkpoint_folder(checkpoint))

    def finish(self, trial_id: str, failed: bool = False) -> None:
        """Closes the trial's tracker run (once)."""
        tracker = self._trackers.pop(trial_id, None)
        if tracker is not None:
            tracker.finish(failed=failed)

    def finish_all(self) -> None:
        """Closes every run still open (the experiment ended)."""
        for trial_id in list(self._trackers):
            self.finish(trial_id)


def mlflow_trials(**options: Any) -> TrialTrackers:
    """MLflow runs for Tune trials (options: `MLFLOW_OPTIONS`).

    Raises:
        ValueError: an unknown option.
        ModuleNotFoundError: mlflow is missing (naming the extra).
    """
    checked = check_options(options, MLFLOW_OPTIONS, "mlflow_callback")
    import_tracker("mlflow", "mlflow", "mlflow_callback")
    return TrialTrackers(lambda trial_dir: MLflowTracker(checked, trial_dir))


def wandb_trials(**options: Any) -> TrialTrackers:
    """W&B runs for Tune trials, offline unless logged in (options: `WANDB_OPTIONS`).

    Raises:
        ValueError: an unknown option or mode.
        ModuleNotFoundError: wandb is missing (naming the extra).
    """
    checked = check_options(options, WANDB_OPTIONS, "wandb_callback")
    import_tracker("wandb", "wandb", "wandb_callback")
    default_mode(checked)
    return TrialTrackers(lambda trial_dir: WandbTracker(checked, trial_dir))


__all__ = ["TrialTrackers", "mlflow_trials", "wandb_trials"]
