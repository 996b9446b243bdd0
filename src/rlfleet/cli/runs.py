"""``rlfleet compare`` (groups' mean curves with bands, PNG + HTML) and ``rlfleet runs`` (a
table of runs)."""
from __future__ import annotations

import argparse
import os

from rlfleet.cli.common import EXIT_OK, UsageError


def cmd_compare(args: argparse.Namespace) -> int:
    from rlfleet.results.compare import compare_runs

    group_by = [k for spec in args.group_by for k in spec.split(",") if k]
    try:
        png, page = compare_runs(args.run_dirs, args.out, metric=args.metric, x=args.x, group_by=group_by,
                                 band=args.band, smoothing=args.smooth)
    except (ValueError, ImportError) as exc:  # no runs, unknown key, no matplotlib: user errors
        raise UsageError(str(exc)) from None
    print(f"Wrote {png}\nWrote {page}", flush=True)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    from rlfleet.results.logger import default_results_dir
    from rlfleet.results.run_summary import format_runs, list_runs

    paths = args.dirs or [default_results_dir()]
    try:
        summaries = list_runs(paths)
    except ValueError as exc:  # not a folder, no run in it
        raise UsageError(str(exc)) from None
    print(format_runs(summaries), end="", flush=True)
    return EXIT_OK


def add_runs_parsers(subs: "argparse._SubParsersAction") -> None:
    """Adds ``compare`` and ``runs`` to the ``rlfleet`` sub-commands."""
    compare = subs.add_parser(
        "compare", help="draw groups of runs (settings x seeds) as mean curves with bands (PNG + HTML)",
        description="Group runs by config keys (default: runs differing only in seed form a group) and draw "
                    "each group's mean curve with a band over its runs, as a PNG and a self-contained HTML page.",
        epilog="example:\n  rlfleet compare ~/rlfleet_results/PPO_CartPole-v1_* --group-by lr --x timesteps "
               "--out lr.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run folder or a folder of runs")
    compare.add_argument("--group-by", action="append", default=[], metavar="KEY",
                         help="config key making the groups, nested with '/' ('algorithm' for the algorithm); "
                              "repeatable or comma-separated")
    compare.add_argument("--metric", default="episode_reward_mean",
                         help="result key to draw, nested with '/' (default episode_reward_mean)")
    compare.add_argument("--x", default="timesteps", metavar="{timesteps,time,iterations}",
                         help="x axis: timesteps (default), time (seconds), iterations, or a result key")
    compare.add_argument("--band", choices=("sem", "minmax"), default="sem",
                         help="the band: standard error over the group's runs (default) or min to max")
    compare.add_argument("--smooth", type=int, default=1, metavar="N",
                         help="moving average over N points, per run")
    compare.add_argument("--out", default=os.path.join(".", "compare.png"), metavar="FILE",
                         help="the PNG to write (default ./compare.png); the HTML page goes beside it (.html)")
    compare.set_defaults(func=cmd_compare, subparser=compare, verbose=0)

    runs = subs.add_parser(
        "runs", help="list runs: algorithm, env, status, best and last return, steps, time, checkpoint",
        description="List the runs at or below DIR (default: $RLFLEET_RESULTS_DIR or ~/rlfleet_results) as a "
                    "table; status is running, finished (a stop criterion met), stopped or failed.")
    runs.add_argument("dirs", nargs="*", metavar="DIR", help="a folder of runs, or a run folder")
    runs.set_defaults(func=cmd_runs, subparser=runs, verbose=0)


__all__ = ["add_runs_parsers", "cmd_compare", "cmd_runs"]
