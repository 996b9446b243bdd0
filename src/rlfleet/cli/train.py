"""``rlfleet train``: runs each experiment, in this process or through Ray Tune."""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import traceback
from typing import Any, Dict, List, Mapping, Optional

from rlfleet.cli import common
from rlfleet.cli.common import EXIT_INTERRUPTED, EXIT_OK, UsageError
from rlfleet.cli.experiments import Experiment, load_experiments
from rlfleet.cli.results import check_stop_keys, describe_stop, format_number, format_progress, step_limit, stop_criteria_met
from rlfleet.results.logger import make_logdir
from rlfleet.results.progress import ProgressReporter
from rlfleet.results.run_status import mark_ended

logger = logging.getLogger(__name__)


class _Checkpointer:
    """Saves checkpoints, at most once per iteration, pruning to `keep_checkpoints_num`."""

    def __init__(self, keep_checkpoints_num: Optional[int] = None) -> None:
        self.last_iteration: Optional[int] = None
        self.keep = keep_checkpoints_num

    def save(self, trainer: Any, iteration: Optional[int]) -> None:
        if iteration is not None and iteration == self.last_iteration:
            return
        from rlfleet.utils.safe_files import CheckpointSaveError  # numpy: only once a trainer exists

        try:
            path = trainer.save(keep_checkpoints_num=self.keep) if self.keep else trainer.save()
        except CheckpointSaveError as e:
            # The earlier checkpoints are intact; training goes on (the next save may succeed).
            print(f"Checkpoint not saved: {e}", file=sys.stderr, flush=True)
            return
        self.last_iteration = iteration
        print(f"Checkpoint saved: {path}", flush=True)


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


def run_experiment(exp: Experiment, trainer_cls: type, verbosity: int = 0, live: Optional[bool] = None) -> int:
    """Trains one experiment until a stop criterion is met or Ctrl-C.

    The trainer writes the log files itself; this only prints progress and checkpoints.
    The last line printed is ``Results: <logdir>`` (also after Ctrl-C or an error), once
    the trainer was created.

    Args:
        exp: the experiment.
        trainer_cls: the trainer class for ``exp.run``.
        verbosity: 0, 1 (-v) or 2 (-vv); > 0 also shows tracebacks of config errors.
        live: progress as a live table (True), plain lines (False), or None: live on a terminal.

    Returns:
        EXIT_OK, or 130 / 143 after SIGINT (Ctrl-C) / SIGTERM (see `_StopOnSignal`).

    Raises:
        UsageError: the trainer rejected the config (ValueError at construction).
    """
    # Made here, named as the trainer would name it, so that a run failing at start-up
    # (bad config, env that cannot be made) leaves no folder behind.
    env_id = exp.env if exp.env is not None else exp.config.get("env")
    created_logdir = make_logdir(getattr(trainer_cls, "_name", exp.run), env_id if isinstance(env_id, str) else None,
                                 exp.local_dir)
    trainer = None
    code = EXIT_OK
    outcome, reason = "failed", None  # how the run ended, for run_status.json (`rlfleet runs`)
    stop_signal = _StopOnSignal()
    progress = ProgressReporter(exp.stop, format_progress, live=live)
    try:
        try:
            trainer = trainer_cls(config=exp.config, env=exp.env, logdir=created_logdir)
        except ValueError as exc:
            # Config validation errors are user errors and name the key (DESIGN.md):
            # show the message, not a traceback, unless asked for with -v.
            if verbosity > 0:
                traceback.print_exc()
            _remove_run_folder(created_logdir)
            raise UsageError(f"experiment {exp.name!r}: invalid config for {exp.run}: "
                             f"{exc}") from None
        except BaseException:
            _remove_run_folder(created_logdir)
            raise

        print(f"== {exp.name}: {exp.run} on {exp.env or '(env from config)'} | {describe_stop(exp.stop)}", flush=True)
        print(f"   logdir: {trainer.logdir}", flush=True)
        checkpointer = _Checkpointer(exp.keep_checkpoints_num)
        # A stop on the env-step count ends the iteration that reaches it (and ES / ARS size
        # their last iteration to it), rather than overshooting by a whole iteration's steps.
        trainer.set_step_limit(step_limit(exp.stop))
        first = True
        result: Mapping[str, Any] = {}
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
            if exp.checkpoint_freq and isinstance(iteration, int) \
                    and iteration % exp.checkpoint_freq == 0:
                checkpointer.save(trainer, iteration)
            met = stop_criteria_met(result, exp.stop)
            if met:
                for key, value, threshold in met:
                    shown = format_number(value, ".6g") or str(value)
                    print(f"Stop criterion met: {key} = {shown} >= {threshold} "
                          f"(iteration {iteration})", flush=True)
                outcome = "finished"
                break
            if stop_signal.signum is not None:
                code = stop_signal.exit_code
                outcome, reason = "stopped", signal.Signals(stop_signal.signum).name
                print(f"Interrupted ({signal.Signals(stop_signal.signum).name}) after iteration {iteration}: "
                      "stopping.", flush=True)
                break
        if exp.checkpoint_at_end or (code != EXIT_OK and exp.checkpoint_freq):
            checkpointer.save(trainer, result.get("training_iteration"))
    except KeyboardInterrupt:
        code = stop_signal.exit_code or EXIT_INTERRUPTED
        outcome, reason = "stopped", "interrupted"
        print("\nInterrupted (Ctrl-C): stopping.", flush=True)
        if trainer is not None and exp.checkpoint_at_end:
            try:
                _Checkpointer(exp.keep_checkpoints_num).save(trainer, None)
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
    experiments = load_experiments(args)
    # Resolve every algorithm before training anything: a typo in the third experiment of
    # a file should not surface after the first two ran for an hour.
    classes = _resolve_trainers(experiments)
    _check_tune_available(experiments)
    for exp, cls in zip(experiments, classes):
        if exp.needs_tune:
            code = run_tune_experiment(exp, cls, verbosity=args.verbose)
        else:
            code = run_experiment(exp, cls, verbosity=args.verbose, live=False if args.quiet else None)
        if code != EXIT_OK:
            return code
    return EXIT_OK
