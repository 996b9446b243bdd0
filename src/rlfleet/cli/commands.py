"""``rlfleet evaluate``, ``plot``, ``config`` and ``list``."""
from __future__ import annotations

import argparse
import json
import os
import traceback

from rlfleet.cli import common
from rlfleet.cli.common import EXIT_OK, UsageError


def _headless_rendering() -> None:
    """Frames for videos need no window: without a display, SDL (pygame, which Gymnasium's
    classic-control envs render with) is told so instead of printing "error: XDG_RUNTIME_DIR
    is invalid or not set" while looking for one."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from rlfleet.trainer.evaluate_checkpoint import evaluate_checkpoint

    if args.episodes < 1:
        raise UsageError(f"argument --episodes: must be >= 1, got {args.episodes}")
    if args.video and not args.render:
        _headless_rendering()
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


def cmd_plot(args: argparse.Namespace) -> int:
    from rlfleet.results.plot import plot_runs

    out = args.out or os.path.join(args.run_dirs[0], "curve.png")
    try:
        path = plot_runs(args.run_dirs, out, metric=args.metric, x=args.x, smoothing=args.smooth)
    except (ValueError, ImportError) as exc:  # no runs, unknown metric, no matplotlib: user errors
        raise UsageError(str(exc)) from None
    print(f"Wrote {path}", flush=True)
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    from rlfleet.config import config_reference, describe_keys

    try:
        text = config_reference() if args.markdown else describe_keys(args.algorithm)
    except ValueError as exc:  # an unknown algorithm: its message lists the known ones
        raise UsageError(str(exc)) from None
    print(text, end="")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    for name in common.available_algorithms():
        print(name)
    return EXIT_OK
