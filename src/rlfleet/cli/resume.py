"""``rlfleet train --resume``: which run to continue, from which checkpoint, with what settings.

`--resume RUN_DIR` continues that run folder; `-f FILE --resume` continues, for each
experiment of the file, its newest run under the experiment's `local_dir` (the run whose
`run.json` names the same file and experiment), and starts the experiments that have none.

A run continues from its newest intact checkpoint with the config that checkpoint records
(a run's config cannot change mid-run); its stop criteria and checkpoint settings are the
run's own (`run.json`), updated by the flags given now (`--stop`, `--checkpoint-*`) or, with
`-f`, taken from the file as it is now. A run that finished (its stop criteria met by its last
result) is reported and left as it is.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from rlfleet.cli.common import UsageError
from rlfleet.cli.experiments import DEFAULT_CHECKPOINT_EVERY_S, Experiment, checked_checkpoint_settings, cli_stop
from rlfleet.cli.results import stop_criteria_met
from rlfleet.results.rewind import last_logged_result
from rlfleet.results.run_folder import default_results_dir
from rlfleet.results.run_record import RUN_FILE, config_digest, read_record
from rlfleet.results.run_status import read_status

# Flags that would change what a resumed run trains: refused with --resume RUN_DIR.
_FIXED_BY_THE_RUN = (("run", "--run"), ("env", "--env"), ("config", "--config"), ("local_dir", "--local-dir"))


@dataclass
class ResumePoint:
    """Where a run continues: its folder, its `run.json`, its newest intact checkpoint."""

    run_dir: str
    record: Dict[str, Any]
    checkpoint: Any  # rlfleet.checkpoint.Checkpoint (imported lazily: it needs NumPy)


@dataclass
class Finished:
    """A run that already met its stop criteria: `message` says so."""

    message: str


Resume = Union[ResumePoint, Finished, None]


def experiment_from_run(args: argparse.Namespace) -> tuple:
    """`--resume RUN_DIR`: the run's experiment (settings updated by the flags given) and
    where it continues (a `ResumePoint`, or `Finished`).

    Raises:
        UsageError: flags a resumed run cannot take, or a folder that is not a resumable run
            (naming what is missing).
    """
    for attr, flag in _FIXED_BY_THE_RUN:
        if getattr(args, attr, None) is not None:
            raise UsageError(f"argument --resume: {flag} cannot change a run being resumed (it goes on with the "
                             "algorithm, env and config its checkpoint records); start a new run to change it")
    if args.config_file:
        raise UsageError("argument --resume: give either --resume RUN_DIR, or -f FILE --resume (no folder) to "
                         "resume the experiments of FILE")
    run_dir = os.path.abspath(os.path.expanduser(args.resume))
    record = _read_run(run_dir)
    stop = dict(record["stop"])
    stop.update(cli_stop(args))
    settings = checked_checkpoint_settings(args, record, f"run {run_dir!r}")
    exp = Experiment(name=str(record.get("experiment") or "default"), run=record["run"], env=record.get("env"),
                     stop=stop, config={}, local_dir=os.path.dirname(run_dir),
                     config_file=record.get("config_file"), **settings)
    return exp, resume_point(run_dir, record, stop)


def resume_points(experiments: List[Experiment]) -> List[Resume]:
    """`-f FILE --resume`: for each experiment, where its newest run continues (None: it has
    no run yet, or none with a checkpoint; it starts anew)."""
    points: List[Resume] = []
    for exp in experiments:
        if exp.needs_tune:
            raise UsageError(f"experiment {exp.name!r}: --resume continues runs trained in this process; this "
                             "experiment runs through Ray Tune (a search space or num_samples > 1)")
        run_dir = _newest_run_of(exp)
        if run_dir is None:
            print(f"== {exp.name}: no earlier run of it under {_parent(exp)}: starting it", flush=True)
            points.append(None)
            continue
        record = _read_run(run_dir)
        if record.get("config_digest") != config_digest(exp.run, exp.env, exp.config):
            print(f"Warning: experiment {exp.name!r} in {exp.config_file} changed since the run {run_dir} started "
                  "(its algorithm, env or config); resuming the run as it started. To train with the change, "
                  "start a new run (without --resume).", flush=True)
        try:
            points.append(resume_point(run_dir, record, exp.stop))
        except _NoCheckpoint as exc:
            print(f"== {exp.name}: {exc}; starting it anew", flush=True)
            points.append(None)
    return points


class _NoCheckpoint(UsageError):
    """A run folder without an intact checkpoint."""


def resume_point(run_dir: str, record: Dict[str, Any], stop: Dict[str, float]) -> Union[ResumePoint, Finished]:
    """Where the run in `run_dir` continues, or `Finished` when its last logged result meets `stop`.

    Raises:
        UsageError: the run is still being trained, or has no intact checkpoint (naming the
            damaged ones).
    """
    from rlfleet.checkpoint.newest import newest_intact_checkpoint

    last = last_logged_result(run_dir)
    status = read_status(run_dir, last)
    if status.status == "finished" and (last is None or stop_criteria_met(last, stop)):
        iteration = last.get("training_iteration") if last else None
        return Finished(f"Run {run_dir} already finished (stop criteria met at iteration {iteration}); "
                        "nothing to resume. Give a higher --stop to train it further.")
    if status.status == "running":
        raise UsageError(f"argument --resume: {run_dir!r} is still being trained by process {status.pid}; stop "
                         f"it first (Ctrl-C, or kill {status.pid}), then resume")
    found = newest_intact_checkpoint(run_dir)
    for path, why in found.skipped:
        print(f"Skipping the damaged checkpoint {path}: {why}", flush=True)
    if found.checkpoint is None:
        why = ("its checkpoints are all damaged" if found.skipped else
               "it has no checkpoint_<n>/ folder with a manifest.json (the run ended before its first checkpoint; "
               "`rlfleet train` saves one every --checkpoint-every-s seconds, "
               f"{DEFAULT_CHECKPOINT_EVERY_S:g} by default, and every --checkpoint-freq iterations)")
        raise _NoCheckpoint(f"run {run_dir!r} holds no intact checkpoint to resume from: {why}")
    return ResumePoint(run_dir=run_dir, record=record, checkpoint=found.checkpoint)


def _read_run(run_dir: str) -> Dict[str, Any]:
    """`run_dir`'s run.json; a UsageError naming what is missing when it is not a run folder."""
    if not os.path.isdir(run_dir):
        raise UsageError(f"argument --resume: no folder at {run_dir!r}")
    try:
        record = read_record(run_dir)
    except ValueError as exc:
        raise UsageError(f"argument --resume: {exc}") from None
    if record is None:
        from rlfleet.checkpoint.folder import list_checkpoints

        hint = (" It holds checkpoints: continue it from Python with trainer.restore(RUN_DIR), or run one with "
                "`rlfleet evaluate`." if list_checkpoints(run_dir) else "")
        raise UsageError(f"argument --resume: {run_dir!r} is not a run folder of `rlfleet train`: it has no "
                         f"{RUN_FILE} (which `rlfleet train` writes when it starts a run).{hint}")
    return record


def _parent(exp: Experiment) -> str:
    return os.path.abspath(os.path.expanduser(exp.local_dir or default_results_dir()))


def _newest_run_of(exp: Experiment) -> Optional[str]:
    """The newest run folder under the experiment's parent folder that `rlfleet train -f` started
    for this experiment of this file (by run.json; folders with unreadable ones are skipped)."""
    parent = _parent(exp)
    try:
        names = os.listdir(parent)
    except OSError:
        return None
    runs = []
    for name in names:
        path = os.path.join(parent, name)
        try:
            record = read_record(path) if os.path.isdir(path) else None
        except (ValueError, OSError):
            continue
        if record and record.get("config_file") == exp.config_file and record.get("experiment") == exp.name:
            runs.append((str(record.get("started") or ""), name, path))
    return max(runs)[2] if runs else None
