"""The ``rlfleet`` argument parser and entry point (``rlfleet.cli:main``)."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Callable, Optional, Sequence

from rlfleet.cli.checkpoint import add_checkpoint_parser
from rlfleet.cli.commands import cmd_config, cmd_evaluate, cmd_list, cmd_plot
from rlfleet.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, UsageError
from rlfleet.cli.missing_packages import missing_package_hint
from rlfleet.cli.runs import add_runs_parsers
from rlfleet.cli.serve import add_serve_parser
from rlfleet.cli.train import cmd_train


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
               "  rlfleet train -f tuned_examples/ppo/cartpole-ppo.yaml\n"
               "  rlfleet train --resume ~/rlfleet_results/PPO_CartPole-v1_2026-01-01_12-00-00_a1b2c3",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("--run", help="algorithm name, e.g. PPO (see `rlfleet list`)")
    train.add_argument("--env", help="environment id, e.g. CartPole-v1")
    train.add_argument("--stop", metavar="JSON",
                       help="stop when ANY result key reaches its threshold, e.g. "
                            "'{\"episode_reward_mean\": 450, \"timesteps_total\": 100000}'; "
                            "nested keys with '/' (RLlib 2.x's 'env_runners/episode_return_mean' too). A key "
                            "missing from the first result is an error, except under evaluation/, info/learner/, "
                            "learners/, custom_metrics/ and policy_reward_*/ (a warning); a timesteps_total stop "
                            "ends the iteration that reaches it, and any iteration at 1/20 of it (before "
                            "min_iter_time_s). Without it: until Ctrl-C")
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
    train.add_argument("--checkpoint-every-s", type=float, default=None, metavar="S",
                       help="also save a checkpoint every S seconds (default 600; 0: never), to resume from "
                            "if the run dies")
    train.add_argument("--resume", nargs="?", const=True, default=None, metavar="RUN_DIR",
                       help="continue the run in RUN_DIR from its newest intact checkpoint; with -f FILE and "
                            "no RUN_DIR: continue each experiment's newest run (start those that have none)")
    train.add_argument("--checkpoint-at-end", action="store_true", default=False,
                       help="save a checkpoint when training ends")
    train.add_argument("--keep-checkpoints-num", type=int, default=None, metavar="N",
                       help="keep only the N newest checkpoints of the run (default: all)")
    train.add_argument("-v", "--verbose", action="count", default=0,
                       help="more logging (-v info, -vv debug)")
    train.add_argument("-q", "--quiet", action="store_true", default=False,
                       help="plain progress lines instead of the live table shown on a terminal")
    train.set_defaults(func=cmd_train, subparser=train)

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
    ev.set_defaults(func=cmd_evaluate, subparser=ev)

    cfg = subs.add_parser("config", help="print every config key with its default and meaning",
                          description="Print the config keys (Markdown tables): the common ones, or those of "
                                      "algorithm ALGO with its defaults.")
    cfg.add_argument("algorithm", nargs="?", metavar="ALGO", help="an algorithm name, e.g. PPO")
    cfg.add_argument("--markdown", action="store_true", default=False,
                     help="the whole reference (docs/config.md): common keys and every algorithm's")
    cfg.set_defaults(func=cmd_config, subparser=cfg, verbose=0)

    lst = subs.add_parser("list", help="list the available algorithms")
    lst.set_defaults(func=cmd_list, subparser=lst, verbose=0)

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
    plot.set_defaults(func=cmd_plot, subparser=plot, verbose=0)
    add_serve_parser(subs)
    add_checkpoint_parser(subs)
    add_runs_parsers(subs)
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
    except Exception as exc:  # an optional package (Box2D for LunarLander, ...) missing: one line
        hint = missing_package_hint(exc)
        if hint is None or args.verbose > 0:
            raise
        print(f"{args.subparser.prog}: error: {hint}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C outside a run (e.g. while importing torch)
        print("\nInterrupted (Ctrl-C).", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        restore_logging()

