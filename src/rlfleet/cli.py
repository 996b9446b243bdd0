"""The ``rlfleet`` command: ``rlfleet train``, ``rlfleet evaluate`` and ``rlfleet list``.

    rlfleet train --run PPO --env CartPole-v1 --stop '{"episode_reward_mean": 450}'
    rlfleet train -f tuned_examples/ppo/cartpole-ppo.yaml
    rlfleet evaluate PATH/checkpoint_10 --episodes 10
    rlfleet list

Importing this module stays cheap (no torch, no algorithms): the registry names algorithms
by module and imports one only when it is looked up, so ``rlfleet --help`` answers instantly.

Exit codes: 0 done, 2 usage error (bad flag, bad JSON/YAML, unknown algorithm, invalid
config), 130 / 143 stopped by SIGINT (Ctrl-C) / SIGTERM (after finishing the iteration).
"""
from __future__ import annotations

import argparse
import copy
import difflib
import json
import logging
import math
import os
import signal
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rlfleet.logger import EXCLUDED_FROM_CSV, flatten_dict, make_logdir
from rlfleet.progress import ProgressReporter
from rlfleet.registry import get_trainer_class, list_algorithms

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # the shell's convention for "killed by SIGINT"

# Keys an experiment in a YAML file may hold (the reference's `rllib train -f` format). Search
# spaces in `config` (`{grid_search: [...]}`, `{choice: [...]}`, ...) or `num_samples` > 1 run
# the experiment through Ray Tune (rlfleet.tune); other keys are ignored with a warning.
_EXPERIMENT_KEYS = ("run", "env", "stop", "config", "local_dir", "checkpoint_freq",
                    "checkpoint_at_end", "keep_checkpoints_num", "num_samples")

_STOP_EXAMPLE = '\'{"episode_reward_mean": 450}\''
_CONFIG_EXAMPLE = '\'{"lr": 0.001}\''


class UsageError(Exception):
    """A mistake in the command line or experiment file; reported without a traceback."""


# --------------------------------------------------------------------------------------
# Trainer lookup (tests monkeypatch these two to inject a fake trainer)
# --------------------------------------------------------------------------------------
def _lookup_trainer(name: str) -> type:
    return get_trainer_class(name)


def _available_algorithms() -> List[str]:
    return list(list_algorithms())


# --------------------------------------------------------------------------------------
# Experiments
# --------------------------------------------------------------------------------------
@dataclass
class Experiment:
    """One training run as described by the command line or one entry of a YAML file."""

    name: str
    run: str
    env: Optional[str]
    stop: Dict[str, float] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)
    local_dir: Optional[str] = None
    checkpoint_freq: int = 0
    checkpoint_at_end: bool = False
    keep_checkpoints_num: Optional[int] = None
    num_samples: int = 1

    @property
    def needs_tune(self) -> bool:
        """Whether only Ray Tune can run it (a search space in `config`, or `num_samples` > 1)."""
        from rlfleet.tune import find_search_space

        return self.num_samples > 1 or find_search_space(self.config) is not None


def _parse_json_object(text: str, flag: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"argument {flag}: invalid JSON ({exc.msg} at position {exc.pos}): "
                         f"{text!r}") from None
    if not isinstance(value, dict):
        example = _STOP_EXAMPLE if flag == "--stop" else _CONFIG_EXAMPLE
        raise UsageError(f"argument {flag}: must be a JSON object such as {example}, "
                         f"got {text!r}")
    return value


def _normalize_stop(stop: Any, where: str) -> Dict[str, float]:
    """Flattens nested stop dicts ({"evaluation": {"x": 1}} -> {"evaluation/x": 1}) and
    checks every threshold is a number."""
    if stop is None:
        return {}
    if not isinstance(stop, Mapping):
        raise UsageError(f"{where}: stop criteria must be a mapping of result key -> "
                         f"threshold such as {_STOP_EXAMPLE}, got {stop!r}")
    flat = flatten_dict(stop)
    for key, threshold in flat.items():
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise UsageError(f"{where}: threshold for stop key {key!r} must be a number, "
                             f"got {threshold!r}")
    return flat


def _deep_merge(base: Dict[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    """Returns base updated by override; nested dicts merge so that --config
    '{"model": {"fcnet_hiddens": [32]}}' keeps the file's other model keys."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _load_yaml(path: str) -> Dict[str, Any]:
    import yaml  # lazily: only -f needs it

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise UsageError(f"argument -f/--config-file: cannot read {path!r}: "
                         f"{exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"argument -f/--config-file: {path!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise UsageError(f"argument -f/--config-file: {path!r} must hold one or more "
                         f"experiments as `name: {{run: ..., env: ..., stop: ..., config: ...}}`")
    return data


def load_experiments(args: argparse.Namespace) -> List[Experiment]:
    """Builds the experiments to run from parsed ``rlfleet train`` arguments.

    With ``-f``, each experiment of the YAML file is updated by the flags given on the
    command line (``--stop`` and ``--config`` update the file's dicts, nested config dicts
    merge; ``--run``, ``--env``, ``--local-dir`` and checkpoint flags replace).

    Args:
        args: the namespace from :func:`build_parser`.

    Returns:
        The experiments, in file order.

    Raises:
        UsageError: bad JSON/YAML, missing ``--run``, non-numeric stop thresholds, or
            a bad ``num_samples``.
    """
    cli_stop = _normalize_stop(_parse_json_object(args.stop, "--stop"), "argument --stop") \
        if args.stop is not None else {}
    cli_config = _parse_json_object(args.config, "--config") if args.config is not None else {}

    if args.config_file:
        specs = _load_yaml(args.config_file)
        where_prefix = f"{args.config_file}: experiment "
    else:
        if not args.run:
            raise UsageError("the following arguments are required: --run (or -f FILE)")
        specs = {"default": {}}
        where_prefix = "experiment "

    experiments = []
    for name, spec in specs.items():
        where = f"{where_prefix}{name!r}"
        if not isinstance(spec, dict):
            raise UsageError(f"{where} must be a mapping with keys {list(_EXPERIMENT_KEYS)}, "
                             f"got {spec!r}")
        unknown = sorted(set(spec) - set(_EXPERIMENT_KEYS))
        if unknown:
            print(f"WARNING: {where}: ignoring key(s) {unknown}; `rlfleet train` reads "
                  f"{list(_EXPERIMENT_KEYS)}.", file=sys.stderr)

        run = args.run or spec.get("run")
        if not run or not isinstance(run, str):
            raise UsageError(f"{where} has no `run:` (the algorithm name, e.g. PPO)")

        file_config = spec.get("config") or {}
        if not isinstance(file_config, dict):
            raise UsageError(f"{where}: `config` must be a mapping, got {file_config!r}")
        config = _deep_merge(file_config, cli_config)

        # Precedence for the env: --env, then --config's "env", then the experiment's `env:`,
        # then `config: {env: ...}` from the file.
        env = args.env or cli_config.get("env") or spec.get("env") or config.get("env")
        if env is not None:
            config["env"] = env  # keep one answer, whichever way the trainer reads it

        samples = spec.get("num_samples", 1)
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise UsageError(f"{where}: num_samples must be an integer >= 1, got {samples!r}")

        stop = _normalize_stop(spec.get("stop"), where)
        stop.update(cli_stop)

        freq = args.checkpoint_freq if args.checkpoint_freq is not None \
            else spec.get("checkpoint_freq", 0)
        if isinstance(freq, bool) or not isinstance(freq, int) or freq < 0:
            raise UsageError(f"{where}: checkpoint_freq must be an integer >= 0, got {freq!r}")
        keep = getattr(args, "keep_checkpoints_num", None)
        keep = keep if keep is not None else spec.get("keep_checkpoints_num")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise UsageError(f"{where}: keep_checkpoints_num must be an integer >= 1, got {keep!r}")
        experiments.append(Experiment(
            name=str(name),
            run=run,
            env=env,
            stop=stop,
            config=config,
            local_dir=args.local_dir or spec.get("local_dir"),
            checkpoint_freq=freq,
            checkpoint_at_end=bool(args.checkpoint_at_end or spec.get("checkpoint_at_end")),
            keep_checkpoints_num=keep,
            num_samples=samples,
        ))
    return experiments


# --------------------------------------------------------------------------------------
# Stop criteria
# --------------------------------------------------------------------------------------
_MISSING = object()


def lookup_result(result: Mapping[str, Any], key: str) -> Any:
    """Returns ``result[key]``, following "/" into nested dicts ("evaluation/x").

    Args:
        result: a result dict.
        key: a top-level key or a "/"-separated path.

    Returns:
        The value, or the module's ``_MISSING`` sentinel when absent.
    """
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def stop_criteria_met(result: Mapping[str, Any],
                      stop: Mapping[str, float]) -> List[Tuple[str, Any, float]]:
    """Tune's dict semantics: training stops when ANY ``result[key] >= threshold``.

    A key missing from the result, a NaN value (e.g. ``episode_reward_mean`` before the first
    episode ends) or a non-numeric value never triggers.

    Args:
        result: the latest result dict.
        stop: result key (nested with "/") -> threshold.

    Returns:
        ``(key, value, threshold)`` for every criterion met; empty to keep training.
    """
    met = []
    for key, threshold in stop.items():
        value = lookup_result(result, key)
        if value is _MISSING:
            continue
        try:
            if value >= threshold:
                met.append((key, value, threshold))
        except TypeError:
            continue
    return met


def _warn_missing_stop_keys(result: Mapping[str, Any], stop: Mapping[str, float]) -> None:
    available = sorted(k for k, v in flatten_dict(result).items()
                       if not any(p in EXCLUDED_FROM_CSV for p in k.split("/"))
                       and isinstance(v, (int, float)) and not isinstance(v, bool))
    for key in stop:
        if lookup_result(result, key) is not _MISSING:
            continue
        if key.split("/")[0] == "evaluation":
            # Evaluation results only exist on evaluation iterations (evaluation_interval).
            hint = " (Evaluation keys appear only on iterations that evaluate.)"
        else:
            close = difflib.get_close_matches(key, available, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
        print(f"WARNING: stop key {key!r} is not in the first result, so it only stops "
              f"training if it appears later.{hint} Available keys: {', '.join(available)}",
              file=sys.stderr)


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------
def _num(value: Any, fmt: str) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return format(value, fmt)


_SHOWN_KEYS = frozenset({"training_iteration", "timesteps_total", "episode_reward_mean",
                         "episode_reward_min", "episode_reward_max", "episode_len_mean",
                         "episodes_total", "time_total_s"})


def format_progress(result: Mapping[str, Any], extra_keys: Sequence[str] = ()) -> str:
    """One progress line, e.g. ``iter   12 | steps   48000 | reward  187.30 (min 21.0,
    max 500.0) | len 187.3 | episodes 312 | 35.2s``.

    Args:
        result: the iteration's result dict; missing or NaN values print as "n/a".
        extra_keys: further keys to show (the CLI passes the stop keys not shown anyway).

    Returns:
        The line, without a newline.
    """
    it = _num(result.get("training_iteration"), ">4d") or " n/a"
    steps = _num(result.get("timesteps_total"), ">7d") or "    n/a"
    reward = _num(result.get("episode_reward_mean"), "7.2f")
    if reward is None:
        reward_part = "reward     n/a"
    else:
        reward_part = f"reward {reward}"
        rmin = _num(result.get("episode_reward_min"), ".1f")
        rmax = _num(result.get("episode_reward_max"), ".1f")
        if rmin is not None and rmax is not None:
            reward_part += f" (min {rmin}, max {rmax})"
    parts = [
        f"iter {it}",
        f"steps {steps}",
        reward_part,
        f"len {_num(result.get('episode_len_mean'), '.1f') or 'n/a'}",
        f"episodes {_num(result.get('episodes_total'), 'd') or 'n/a'}",
        f"{_num(result.get('time_total_s'), '.1f') or 'n/a'}s",
    ]
    for key in extra_keys:
        if key in _SHOWN_KEYS:
            continue
        value = lookup_result(result, key)
        if value is _MISSING:
            continue
        shown = _num(value, ".4g") or str(value)
        parts.append(f"{key} {shown}")
    return " | ".join(parts)


def _describe_stop(stop: Mapping[str, float]) -> str:
    if not stop:
        return "no stop criteria: training until Ctrl-C"
    return "stop when any of: " + ", ".join(f"{k} >= {v}" for k, v in stop.items())


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------
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


def _remove_if_empty(path: Optional[str]) -> None:
    if path:
        try:
            os.rmdir(path)  # fails (and we keep it) unless empty
        except OSError:
            pass


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
    created_logdir = make_logdir(exp.run, exp.env, exp.local_dir) if exp.local_dir else None
    trainer = None
    code = EXIT_OK
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
            _remove_if_empty(created_logdir)
            raise UsageError(f"experiment {exp.name!r}: invalid config for {exp.run}: "
                             f"{exc}") from None
        except BaseException:
            _remove_if_empty(created_logdir)
            raise

        print(f"== {exp.name}: {exp.run} on {exp.env or '(env from config)'} | {_describe_stop(exp.stop)}", flush=True)
        print(f"   logdir: {trainer.logdir}", flush=True)
        checkpointer = _Checkpointer(exp.keep_checkpoints_num)
        first = True
        result: Mapping[str, Any] = {}
        while True:
            stop_signal.install()
            result = trainer.train()
            if first:
                first = False
                _warn_missing_stop_keys(result, exp.stop)
            progress.update(result)
            iteration = result.get("training_iteration")
            if exp.checkpoint_freq and isinstance(iteration, int) \
                    and iteration % exp.checkpoint_freq == 0:
                checkpointer.save(trainer, iteration)
            met = stop_criteria_met(result, exp.stop)
            if met:
                for key, value, threshold in met:
                    shown = _num(value, ".6g") or str(value)
                    print(f"Stop criterion met: {key} = {shown} >= {threshold} "
                          f"(iteration {iteration})", flush=True)
                break
            if stop_signal.signum is not None:
                code = stop_signal.exit_code
                print(f"Interrupted ({signal.Signals(stop_signal.signum).name}) after iteration {iteration}: "
                      "stopping.", flush=True)
                break
        if exp.checkpoint_at_end or (code != EXIT_OK and exp.checkpoint_freq):
            checkpointer.save(trainer, result.get("training_iteration"))
    except KeyboardInterrupt:
        code = stop_signal.exit_code or EXIT_INTERRUPTED
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
            print(f"Results: {trainer.logdir}", flush=True)
    return code


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------
def _resolve_trainers(experiments: List[Experiment]) -> List[type]:
    classes = []
    for exp in experiments:
        try:
            classes.append(_lookup_trainer(exp.run))
        except ValueError:
            try:
                names = ", ".join(_available_algorithms())
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
          f"{exp.num_samples} sample(s) | {_describe_stop(exp.stop)}", flush=True)
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


def _cmd_train(args: argparse.Namespace) -> int:
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


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from rlfleet.evaluate_checkpoint import evaluate_checkpoint

    if args.episodes < 1:
        raise UsageError(f"argument --episodes: must be >= 1, got {args.episodes}")
    try:
        report = evaluate_checkpoint(args.checkpoint, args.episodes, env=args.env, render=args.render,
                                     video=args.video, trusted_modules=args.trust_modules, on_episode=lambda i, ret, length: print(
                                         f"Episode {i + 1}: return {ret:.6g} (length {length})", flush=True))
    except ValueError as exc:  # CheckpointError, bad --env: user errors, no traceback
        if args.verbose > 0:
            traceback.print_exc()
        raise UsageError(str(exc)) from None
    print(f"Mean return over {len(report['episodes'])} episodes: {report['mean_return']:.6g}", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
        print(f"Wrote {args.out}", flush=True)
    return EXIT_OK


def _cmd_plot(args: argparse.Namespace) -> int:
    from rlfleet.plot import plot_runs

    out = args.out or os.path.join(args.run_dirs[0], "curve.png")
    try:
        path = plot_runs(args.run_dirs, out, metric=args.metric, x=args.x, smoothing=args.smooth)
    except (ValueError, ImportError) as exc:  # no runs, unknown metric, no matplotlib: user errors
        raise UsageError(str(exc)) from None
    print(f"Wrote {path}", flush=True)
    return EXIT_OK


def _cmd_config(args: argparse.Namespace) -> int:
    from rlfleet.config import config_reference, describe_keys

    try:
        text = config_reference() if args.markdown else describe_keys(args.algorithm)
    except ValueError as exc:  # an unknown algorithm: its message lists the known ones
        raise UsageError(str(exc)) from None
    print(text, end="")
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    for name in _available_algorithms():
        print(name)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """Returns the ``rlfleet`` argument parser (sub-commands ``train`` and ``list``)."""
    parser = argparse.ArgumentParser(
        prog="rlfleet", description="Train reinforcement-learning policies with one config.")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = subs.add_parser(
        "train", help="train an algorithm on an env",
        description="Train an algorithm until a stop criterion is met (or Ctrl-C).",
        epilog="examples:\n"
               "  rlfleet train --run PPO --env CartPole-v1 "
               "--stop '{\"episode_reward_mean\": 450}'\n"
               "  rlfleet train -f tuned_examples/ppo/cartpole-ppo.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("--run", help="algorithm name, e.g. PPO (see `rlfleet list`)")
    train.add_argument("--env", help="environment id, e.g. CartPole-v1")
    train.add_argument("--stop", metavar="JSON",
                       help="stop when ANY result key reaches its threshold, e.g. "
                            "'{\"episode_reward_mean\": 450, \"timesteps_total\": 100000}'; "
                            "nested keys with '/'. Without it: until Ctrl-C")
    train.add_argument("--config", metavar="JSON",
                       help="config overrides as a JSON object, e.g. '{\"lr\": 0.001}'")
    train.add_argument("-f", "--config-file", metavar="FILE",
                       help="YAML file of experiments `name: {run, env, stop, config}`; "
                            "--stop/--config given too update each experiment")
    train.add_argument("--local-dir", metavar="DIR",
                       help="parent folder of the run folder (default: $RLFLEET_RESULTS_DIR "
                            "or ~/rlfleet_results)")
    train.add_argument("--checkpoint-freq", type=int, default=None, metavar="N",
                       help="save a checkpoint every N iterations (0: never)")
    train.add_argument("--checkpoint-at-end", action="store_true", default=False,
                       help="save a checkpoint when training ends")
    train.add_argument("--keep-checkpoints-num", type=int, default=None, metavar="N",
                       help="keep only the N newest checkpoints of the run (default: all)")
    train.add_argument("-v", "--verbose", action="count", default=0,
                       help="more logging (-v info, -vv debug)")
    train.add_argument("-q", "--quiet", action="store_true", default=False,
                       help="plain progress lines instead of the live table shown on a terminal")
    train.set_defaults(func=_cmd_train, subparser=train)

    ev = subs.add_parser(
        "evaluate", help="run a saved policy greedily and print its episode returns",
        description="Restore a checkpoint (rlfleet train --checkpoint-freq/--checkpoint-at-end, or "
                    "Trainer.save) and run its policy without exploration.",
        epilog="example:\n  rlfleet evaluate ~/rlfleet_results/PPO_CartPole-v1_.../checkpoint_10 "
               "--episodes 10 --out returns.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint folder")
    ev.add_argument("--episodes", type=int, default=10, metavar="N", help="episodes to run (default 10)")
    ev.add_argument("--env", help="run in this env instead of the checkpoint's")
    ev.add_argument("--render", action="store_true", default=False, help="render each step")
    ev.add_argument("--video", metavar="DIR", help="record the episodes as MP4 files into DIR (rlfleet[video])")
    ev.add_argument("--trust-module", action="append", default=[], dest="trust_modules", metavar="NAME",
                    help="let the checkpoint's classes and functions be imported from module/package NAME "
                         "(repeatable; rlfleet and gymnasium are always trusted, nothing else by default)")
    ev.add_argument("--out", metavar="FILE", help="also write the returns to FILE as JSON")
    ev.add_argument("-v", "--verbose", action="count", default=0,
                    help="more logging (-v info, -vv debug)")
    ev.set_defaults(func=_cmd_evaluate, subparser=ev)

    cfg = subs.add_parser("config", help="print every config key with its default and meaning",
                          description="Print the config keys (Markdown tables): the common ones, or those of "
                                      "algorithm ALGO with its defaults.")
    cfg.add_argument("algorithm", nargs="?", metavar="ALGO", help="an algorithm name, e.g. PPO")
    cfg.add_argument("--markdown", action="store_true", default=False,
                     help="the whole reference (docs/config.md): common keys and every algorithm's")
    cfg.set_defaults(func=_cmd_config, subparser=cfg, verbose=0)

    lst = subs.add_parser("list", help="list the available algorithms")
    lst.set_defaults(func=_cmd_list, subparser=lst, verbose=0)

    plot = subs.add_parser(
        "plot", help="draw learning curves of runs as a PNG",
        description="Draw a metric against timesteps (or time) for one or several runs (folders with a "
                    "result.json, or folders of them such as a Tune experiment), with min/max bands.",
        epilog="example:\n  rlfleet plot ~/rlfleet_results/PPO_CartPole-v1_* --smooth 5 --out curve.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    plot.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run folder or a folder of runs")
    plot.add_argument("--metric", default="episode_reward_mean",
                      help="result key to plot, nested with '/' (default episode_reward_mean)")
    plot.add_argument("--x", default="timesteps_total",
                      help="x axis: timesteps_total (default), time_total_s, training_iteration, ...")
    plot.add_argument("--smooth", type=int, default=1, metavar="N", help="moving average over N points")
    plot.add_argument("--out", metavar="FILE", help="the PNG to write (default: RUN_DIR/curve.png)")
    plot.set_defaults(func=_cmd_plot, subparser=plot, verbose=0)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is *now* (pytest and callers may swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _configure_logging(verbosity: int) -> Callable[[], None]:
    """Points the "rlfleet" loggers at stderr; returns a function undoing it, so that
    calling main() in-process (tests, notebooks) leaves logging as it found it."""
    pkg_logger = logging.getLogger("rlfleet")
    old_level = pkg_logger.level
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 \
        else logging.DEBUG
    pkg_logger.setLevel(level)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    pkg_logger.addHandler(handler)

    def restore() -> None:
        pkg_logger.removeHandler(handler)
        pkg_logger.setLevel(old_level)

    return restore


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``rlfleet`` console script.

    Args:
        argv: arguments without the program name; None reads ``sys.argv[1:]``.

    Returns:
        The exit code: 0 done, 2 usage error, 130 interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage + message (or --help)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    restore_logging = _configure_logging(args.verbose)
    try:
        return args.func(args)
    except UsageError as exc:
        args.subparser.print_usage(sys.stderr)
        print(f"{args.subparser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C outside a run (e.g. while importing torch)
        print("\nInterrupted (Ctrl-C).", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        restore_logging()


if __name__ == "__main__":
    sys.exit(main())
