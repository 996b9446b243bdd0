"""``rlfleet train``: runs each experiment, in this process or through Ray Tune."""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import time
import traceback
from typing import Any, Dict, List, Mapping, Optional

from rlfleet.cli import common
from rlfleet.cli.common import EXIT_INTERRUPTED, EXIT_OK, UsageError
from rlfleet.cli.experiments import Experiment, load_experiments
from rlfleet.cli.resume import Finished, ResumePoint, experiment_from_run, resume_points
from rlfleet.cli.results import check_stop_keys, describe_stop, format_number, format_progress, step_limit, stop_criteria_met
from rlfleet.results.logger import make_logdir
from rlfleet.results.rewind import last_logged_result
from rlfleet.results.run_record import config_digest, start_record
from rlfleet.results.progress import ProgressReporter
from rlfleet.results.run_status import mark_ended

logger = logging.getLogger(__name__)


class _Checkpointer:
    """Saves a run's checkpoints, at most once per iteration: every `checkpoint_freq` iterations
    and every `checkpoint_every_s` seconds, and the final one; prunes to `keep_checkpoints_num`.

    Each checkpoint saved during the run is a point the run goes on from exactly as a run
    resumed from it would (`Trainer.save(continue_from_checkpoint=True)`), so a killed run,
    resumed, repeats the uninterrupted one. Without `keep_checkpoints_num`, one saved only
    because its time was up is deleted once a newer one is saved: it is there to resume from,
    and a run of days would otherwise pile one up every ten minutes.
    """

    def __init__(self, exp: Experiment, resumed_from: Optional[str] = None, iteration: Optional[int] = None) -> None:
        self.freq, self.every_s, self.keep = exp.checkpoint_freq, exp.checkpoint_every_s, exp.keep_checkpoints_num
        self.last_iteration: Optional[int] = iteration
        self.last_time = time.monotonic()
        self._timed = resumed_from if resumed_from and not self._due_by_iteration(iteration) else None

    def _due_by_iteration(self, iteration: Optional[int]) -> bool:
        return bool(self.freq) and isinstance(iteration, int) and iteration % self.freq == 0

    def after_iteration(self, trainer: Any, iteration: Optional[int]) -> None:
        """Saves when `checkpoint_freq` or `checkpoint_every_s` says so."""
        by_iteration = self._due_by_iteration(iteration)
        if by_iteration or (self.every_s and time.monotonic() - self.last_time >= self.every_s):
            self.save(trainer, iteration, timed=not by_iteration, go_on=True)

    def save(self, trainer: Any, iteration: Optional[int], *, timed: bool = False, go_on: bool = False) -> None:
        """Saves now (unless this iteration's checkpoint exists); `go_on`: the run continues
        from it (see the class docstring)."""
        if iteration is not None and iteration == self.last_iteration:
            return
        from rlfleet.checkpoint.folder import remove_checkpoint  # numpy: only once a trainer exists
        from rlfleet.utils.safe_files import CheckpointSaveError

        try:
            path = trainer.save(keep_checkpoints_num=self.keep, continue_from_checkpoint=go_on)
        except CheckpointSaveError as e:
            # The earlier checkpoints are intact; training goes on (the next save may succeed).
            print(f"Checkpoint not saved: {e}", file=sys.stderr, flush=True)
            return
        self.last_iteration, self.last_time = iteration, time.monotonic()
        print(f"Checkpoint saved: {path}", flush=True)
        if self.keep is None:
            previous, self._timed = self._timed, (path if timed else None)
            if previous is not None and previous != path and os.path.isdir(previous):
                remove_checkpoint(previous)


def _error_reason() -> Optional[str]:
    """The exception being handled, in one line (the run ends in `finally` while it propagates)."""
    exc = sys.exc_info()[1]
    return None if exc is None else f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def _remove_run_folder(path: str) -> None:
    """Removes the run folder of a run that failed at start-up (params.json and empty logs)."""
    shutil.rmtree(path, ignore_errors=True)


class _StopOnSignal:
    """SIGINT (Ctrl-C) and SIGTERM while training: the current iteration finishes, then the
    run stops as after its last iteration (checkpoint, logs closed) and exits 128 + signal
    number (130 / 143). A second signal stops at once (KeyboardInterrupt). Installed by
    `run_experiment` for its duration (main thread only); `restore()` puts the old handlers back.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._old: Dict[int, Any] = {}
        self.install()

    def install(self) -> None:
        """(Re)installs the handlers: Ray, once started, puts its own SIGTERM handler in
        place, so `run_experiment` calls this before every iteration."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                return
            self._old.setdefault(sig, old)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        # os.write, not print: a handler may run in the middle of another print.
        os.write(2, f"\n{signal.Signals(signum).name} received: finishing the current iteration, then "
                    "stopping (send it again to stop at once)\n".encode())

    @property
    def exit_code(self) -> Optional[int]:
        return None if self.signum is None else 128 + int(self.signum)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}


def _record_entries(exp: Experiment) -> Dict[str, Any]:
    """What run.json records of an experiment (see `rlfleet.results.run_record`)."""
    return {"experiment": exp.name, "run": exp.run, "env": exp.env, "config_file": exp.config_file,
            "config_digest": config_digest(exp.run, exp.env, exp.config), "stop": exp.stop,
            "checkpoint_freq": exp.checkpoint_freq, "checkpoint_every_s": exp.checkpoint_every_s,
            "checkpoint_at_end": exp.checkpoint_at_end, "keep_checkpoints_num": exp.keep_checkpoints_num}


def _start_trainer(exp: Experiment, trainer_cls: type, verbosity: int, resume: Optional[ResumePoint]) -> Any:
    """The trainer of a new run (in a new run folder), or of a resumed one (in its folder,
    restored from its checkpoint, which rewinds its logs to it: `Trainer.restore`)."""
    if resume is not None:
        iteration = int(resume.checkpoint.manifest["iteration"])
        last = last_logged_result(resume.run_dir) or {}
        logged = last.get("training_iteration") if isinstance(last.get("training_iteration"), int) else iteration
        from rlfleet.checkpoint import CheckpointError  # numpy: only when resuming

        try:
            trainer = trainer_cls.from_checkpoint(resume.checkpoint, logdir=resume.run_dir)
        except CheckpointError as exc:  # e.g. a recorded class from a module not trusted
            raise UsageError(f"argument --resume: {exc}") from None
        counters = resume.checkpoint.manifest.get("counters") or {}
        print(f"Resuming {resume.run_dir} from {os.path.basename(resume.checkpoint.path)} (iteration {iteration}, "
              f"{counters.get('num_env_steps_sampled', 0)} timesteps); its logs are cut to it, and the "
              f"{max(0, logged - iteration)} iteration(s) logged after it are trained again.", flush=True)
        if trainer.config.get("store_buffer_in_checkpoints") is False:  # an algorithm with a replay buffer
            print("Note: this run's checkpoints hold no replay buffer (store_buffer_in_checkpoints: false), so it "
                  "goes on with an empty one and will not repeat an uninterrupted run exactly; set "
                  "store_buffer_in_checkpoints: true in the config of runs to resume exactly.", flush=True)
        return trainer
    # Made here, named as the trainer would name it, so that a run failing at start-up
    # (bad config, env that cannot be made) leaves no folder behind.
    env_id = exp.env if exp.env is not None else exp.config.get("env")
    created_logdir = make_logdir(getattr(trainer_cls, "_name", exp.run), env_id if isinstance(env_id, str) else None,
                                 exp.local_dir)
    try:
        return trainer_cls(config=exp.config, env=exp.env, logdir=created_logdir)
    except ValueError as exc:
        # Config validation errors are user errors and name the key (DESIGN.md):
        # show the message, not a traceback, unless asked for with -v.
        if verbosity > 0:
            traceback.print_exc()
        _remove_run_folder(created_logdir)
        raise UsageError(f"experiment {exp.name!r}: invalid config for {exp.run}: {exc}") from None
    except BaseException:
        _remove_run_folder(created_logdir)
        raise


def run_experiment(exp: Experiment, trainer_cls: type, verbosity: int = 0, live: Optional[bool] = None,
                   resume: Optional[ResumePoint] = None) -> int:
    """Trains one experiment until a stop criterion is met or Ctrl-C.

    The trainer writes the log files itself; this only prints progress, saves checkpoints
    (see `_Checkpointer`) and keeps the run folder's run.json (`rlfleet.results.run_record`).
    The last line printed is ``Results: <logdir>`` (also after Ctrl-C or an error), once
    the trainer was created.

    Args:
        exp: the experiment.
        trainer_cls: the trainer class for ``exp.run``.
        verbosity: 0, 1 (-v) or 2 (-vv); > 0 also shows tracebacks of config errors.
        live: progress as a live table (True), plain lines (False), or None: live on a terminal.
        resume: continue this run from its checkpoint instead of starting a new one.

    Returns:
        EXIT_OK, or 130 / 143 after SIGINT (Ctrl-C) / SIGTERM (see `_StopOnSignal`).

    Raises:
        UsageError: the trainer rejected the config (ValueError at construction).
    """
    trainer = None
    code = EXIT_OK
    outcome, reason = "failed", None  # how the run ended, for run_status.json (`rlfleet runs`)
    stop_signal = _StopOnSignal()
    progress = ProgressReporter(exp.stop, format_progress, live=live)
    result: Mapping[str, Any] = {}
    try:
        trainer = _start_trainer(exp, trainer_cls, verbosity, resume)
        entries = _record_entries(exp)
        if resume is not None:  # the run's own algorithm, env, config and start time
            entries = dict(resume.record, stop=exp.stop, **{k: v for k, v in entries.items() if k.startswith("checkpoint_")})
        start_record(trainer.logdir, entries)
        print(f"== {exp.name}: {exp.run} on {exp.env or '(env from config)'} | {describe_stop(exp.stop)}", flush=True)
        print(f"   logdir: {trainer.logdir}", flush=True)
        resumed_iteration = int(resume.checkpoint.manifest["iteration"]) if resume is not None else None
        checkpointer = _Checkpointer(exp, resume.checkpoint.path if resume is not None else None, resumed_iteration)
        # A stop on the env-step count ends the iteration that reaches it (and ES / ARS size
        # their last iteration to it), rather than overshooting by a whole iteration's steps.
        trainer.set_step_limit(step_limit(exp.stop))
        first = True
        while True:
            stop_signal.install()
            result = trainer.train()
            if first:
                first = False
                try:
                    check_stop_keys(result, exp.stop)
                except UsageError as exc:
                    raise UsageError(f"experiment {exp.name!r}: {exc}") from None
            progress.update(result)
            iteration = result.get("training_iteration")
            checkpointer.after_iteration(trainer, iteration)
            met = stop_criteria_met(result, exp.stop)
            if met:
                lines = [f"Stop criterion met: {key} = {format_number(value, '.6g') or str(value)} >= {threshold} "
                         f"(iteration {iteration})" for key, value, threshold in met]
                print("\n".join(lines), flush=True)
                outcome = "finished"
                break
            if stop_signal.signum is not None:
                code = stop_signal.exit_code
                outcome, reason = "stopped", signal.Signals(stop_signal.signum).name
                print(f"Interrupted ({reason}) after iteration {iteration}: stopping.", flush=True)
                break
        if exp.checkpoint_at_end or (code != EXIT_OK and (exp.checkpoint_freq or exp.checkpoint_every_s)):
            checkpointer.save(trainer, result.get("training_iteration"))
    except KeyboardInterrupt:
        code = stop_signal.exit_code or EXIT_INTERRUPTED
        outcome, reason = "stopped", "interrupted"
        print("\nInterrupted (Ctrl-C): stopping.", flush=True)
        if trainer is not None and exp.checkpoint_at_end:
            try:
                _Checkpointer(exp).save(trainer, None)
            except Exception:
                logger.exception("Saving the final checkpoint after Ctrl-C failed")
    finally:
        progress.close()
        stop_signal.restore()
        if trainer is not None:
            try:
                trainer.stop()
            except Exception:
                logger.exception("trainer.stop() failed")
            mark_ended(trainer.logdir, outcome, reason if outcome != "failed" else _error_reason())
            print(f"Results: {trainer.logdir}", flush=True)
    return code


def _resolve_trainers(experiments: List[Experiment]) -> List[type]:
    classes = []
    for exp in experiments:
        try:
            classes.append(common.lookup_trainer(exp.run))
        except ValueError:
            try:
                names = ", ".join(common.available_algorithms())
            except Exception:
                names = "(could not list them)"
            raise UsageError(f"argument --run: unknown algorithm {exp.run!r}; "
                             f"available: {names}") from None
    return classes


def _check_tune_available(experiments: List[Experiment]) -> None:
    from rlfleet.tune import TUNE_INSTALL_HINT, find_search_space, tune_available

    for exp in experiments:
        if exp.needs_tune and not tune_available():
            what = (f"config key {find_search_space(exp.config)!r} is a search space" if exp.num_samples == 1
                    else f"num_samples is {exp.num_samples}")
            raise UsageError(f"experiment {exp.name!r}: {what}, which needs Ray Tune; install it with: "
                             f"{TUNE_INSTALL_HINT}")


def run_tune_experiment(exp: Experiment, trainer_cls: type, verbosity: int = 0) -> int:
    """Runs an experiment with search spaces or `num_samples` through Ray Tune (rlfleet.tune):
    one trial per sample, Tune's status table as progress, results under
    `<local_dir>/<experiment name>/<trial>/`.

    Returns:
        EXIT_OK when every trial finished, else 1 (the failed trials are named).
    """
    from rlfleet.tune import run_experiments

    print(f"== {exp.name}: {exp.run} on {exp.env or '(env from config)'} through Ray Tune, "
          f"{exp.num_samples} sample(s) | {describe_stop(exp.stop)}", flush=True)
    trials = run_experiments({exp.name: {
        "run": trainer_cls, "config": exp.config, "stop": exp.stop, "num_samples": exp.num_samples,
        "checkpoint_freq": exp.checkpoint_freq, "checkpoint_at_end": exp.checkpoint_at_end,
        "keep_checkpoints_num": exp.keep_checkpoints_num, "local_dir": exp.local_dir,
    }}, verbose=1 if verbosity <= 0 else 2)
    failed = [t for t in trials if t.status != "TERMINATED"]
    for trial in trials:
        print(f"{trial}: {trial.status} | {format_progress(trial.last_result or {}, list(exp.stop))}", flush=True)
    if trials:
        print(f"Results: {os.path.dirname(trials[0].path)}", flush=True)
    if failed:
        print(f"{len(failed)} trial(s) failed: {', '.join(str(t) for t in failed)}", file=sys.stderr)
        return 1
    return EXIT_OK


def cmd_train(args: argparse.Namespace) -> int:
    if isinstance(getattr(args, "resume", None), str):  # --resume RUN_DIR
        exp, point = experiment_from_run(args)
        experiments, points = [exp], [point]
    else:
        experiments = load_experiments(args)
        points = resume_points(experiments) if getattr(args, "resume", None) else [None] * len(experiments)
    # Resolve every algorithm before training anything: a typo in the third experiment of
    # a file should not surface after the first two ran for an hour.
    classes = _resolve_trainers(experiments)
    _check_tune_available(experiments)
    for exp, cls, point in zip(experiments, classes, points):
        if isinstance(point, Finished):
            print(point.message, flush=True)
            continue
        if exp.needs_tune:
            code = run_tune_experiment(exp, cls, verbosity=args.verbose)
        else:
            code = run_experiment(exp, cls, verbosity=args.verbose, live=False if args.quiet else None, resume=point)
        if code != EXIT_OK:
            return code
    return EXIT_OK
