"""What the experiment trackers (MLflow, Weights & Biases) share: the run's parameters and
metrics as trackers take them, the checkpoints to upload, the options check, and
`TrackerLogger`, the `logger_config` logger that drives a tracker.

A tracker is one run of an experiment-tracking service, driven by four calls:
`start(name, config)`, `log(metrics, step)` for every result, `log_checkpoint(path)` for
every checkpoint folder written, and `finish()`. `TrackerLogger` calls them from a run's
results (`rlfleet train`, a `Trainer`, a Tune trial's trainer); the Tune callbacks
(`rlfleet.results.trial_trackers`, through `rlfleet.tune`) call them from Tune's driver, one tracker per trial.

Each tracker's package is an optional extra; a missing one is an ImportError of one line
naming `pip install 'rlfleet[<extra>]'`.
"""
from __future__ import annotations

import importlib
import json
import math
import os
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Mapping, Optional, Set

from rlfleet.results.logger import Logger
from rlfleet.results.result_values import excluded_from_csv, flatten_dict, is_number, to_jsonable


def import_tracker(module: str, extra: str, what: str) -> Any:
    """Imports and returns the tracker package `module`.

    Raises:
        ModuleNotFoundError: one line naming the rlfleet extra that installs it (the CLI
            shows it as its one-line hint: `rlfleet.cli.missing_packages`).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ModuleNotFoundError(f"{what} needs the optional package {module!r} ({exc}); install it with: "
                                  f"pip install 'rlfleet[{extra}]'", name=module.split(".")[0]) from None


def check_options(options: Any, known: Mapping[str, str], where: str) -> Dict[str, Any]:
    """`options` (a tracker's dict in `logger_config`, or a callback's keywords) checked
    against `known` (`{option: meaning}`).

    Raises:
        ValueError: naming `where`, the unknown option and the known ones.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"{where}: expected a dict of options ({', '.join(sorted(known))}), got {options!r}")
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {', '.join(map(repr, unknown))}; known: "
                         + "; ".join(f"{k} ({v})" for k, v in sorted(known.items())))
    return dict(options)


def tracked_params(config: Mapping[str, Any]) -> Dict[str, str]:
    """The run's config as tracker parameters: flat "a/b" names, values as JSON text."""
    flat = flatten_dict(to_jsonable(dict(config)))
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in flat.items()}


def tracked_metrics(result: Mapping[str, Any]) -> Dict[str, float]:
    """The finite numbers of a result, flat "a/b" names, without the bulky keys that
    progress.csv leaves out (per-episode lists, the config)."""
    safe = to_jsonable(dict(result))
    flat = flatten_dict(safe) if isinstance(safe, dict) else {}
    return {key: float(value) for key, value in flat.items()
            if is_number(value) and math.isfinite(value) and not excluded_from_csv(key)}


def result_step(result: Mapping[str, Any]) -> int:
    """A result's step on the trackers' x axis: `timesteps_total`, else `training_iteration`."""
    for key in ("timesteps_total", "training_iteration"):
        value = result.get(key)
        if is_number(value):
            return int(value)
    return 0


def run_checkpoints(run_dir: str) -> List[str]:
    """The complete checkpoint folders of a run, oldest first: `checkpoint_<n>/` as
    `Trainer.save` writes them, or inside Tune's `checkpoint_<nnnnnn>/` folders."""
    from rlfleet.checkpoint.folder import list_checkpoints  # numpy: only once a checkpoint is looked for

    found = list_checkpoints(run_dir)
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return found
    for name in names:
        inner = os.path.join(run_dir, name)
        if name.startswith("checkpoint_") and os.path.isdir(inner) and inner not in found:
            found += list_checkpoints(inner)
    return found


class CheckpointWatch:
    """The checkpoints that appeared in a run folder since the last look."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self._seen: Set[str] = set()

    def new(self) -> List[str]:
        """Checkpoint folders not returned before, oldest first."""
        fresh = [p for p in run_checkpoints(self.run_dir) if p not in self._seen]
        self._seen.update(fresh)
        return fresh


class Tracker(ABC):
    """One run of an experiment tracker (subclassed per service).

    Attributes:
        options: the tracker's options (its `logger_config` dict, or the callback's keywords).
    """

    options: Mapping[str, Any] = {}

    @abstractmethod
    def start(self, name: str, config: Mapping[str, Any]) -> None:
        """Opens the run, named `name`, recording the run's `config` (JSON-safe values)."""

    @abstractmethod
    def log(self, metrics: Mapping[str, float], step: int) -> None:
        """Logs one result's metrics at `step`."""

    @abstractmethod
    def log_checkpoint(self, path: str) -> None:
        """Uploads (or records) the checkpoint folder `path`."""

    @abstractmethod
    def finish(self, failed: bool = False) -> None:
        """Closes the run (marked failed when `failed`)."""


class TrackerLogger(Logger, ABC):
    """A `logger_config` logger driving one `Tracker` per run.

    Its options sit under `logger_config[<option_key>]` (e.g. `{"type": [..., "MLflowLogger"],
    "mlflow": {"experiment_name": "cartpole"}}`), so that two trackers never share a name.
    Subclasses set `option_key`, `OPTIONS` (`{option: meaning}`) and `make_tracker`.
    """

    option_key = ""
    OPTIONS: Mapping[str, str] = {}

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        self.options = check_options(config.get(self.option_key), self.OPTIONS,
                                     f"logger_config.{self.option_key}")
        self._tracker: Optional[Tracker] = None
        self._watch: Optional[CheckpointWatch] = None

    @abstractmethod
    def make_tracker(self, options: Mapping[str, Any], run_dir: str) -> Tracker:
        """The tracker for the run in `run_dir`."""

    def on_config(self, config: Mapping[str, Any], run_dir: str) -> None:
        self._open(run_dir, config)

    def _open(self, run_dir: str, config: Mapping[str, Any]) -> None:
        self._tracker = self.make_tracker(self.options, run_dir)
        safe = to_jsonable(dict(config))
        self._tracker.start(os.path.basename(os.path.normpath(run_dir)), safe if isinstance(safe, dict) else {})
        self._watch = CheckpointWatch(run_dir)

    def _upload_checkpoints(self) -> None:
        if self._watch is not None and self.options.get("log_checkpoints", True):
            for path in self._watch.new():
                self._tracker.log_checkpoint(path)

    def on_result(self, result: Mapping[str, Any]) -> None:
        if self._tracker is None:  # built by hand, outside UnifiedLogger: no config to log
            self._open(self.logdir, {})
        # A checkpoint is saved after its iteration's result: it goes up with the next one.
        self._upload_checkpoints()
        self._tracker.log(tracked_metrics(result), result_step(result))

    def close(self) -> None:
        if self._tracker is not None:
            self._upload_checkpoints()
            self._tracker.finish()
            self._tracker = None


__all__ = ["CheckpointWatch", "Tracker", "TrackerLogger", "check_options", "import_tracker", "result_step",
           "run_checkpoints", "tracked_metrics", "tracked_params"]
