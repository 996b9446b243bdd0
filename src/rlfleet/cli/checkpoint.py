"""`rlfleet checkpoint inspect PATH` (what a checkpoint holds, read from its JSON alone: nothing
it names is imported) and `rlfleet checkpoint upgrade PATH` (rewrite an older format in the
current one); see rlfleet.checkpoint.summary and rlfleet.checkpoint.upgrade."""
from __future__ import annotations

import argparse
import json

from rlfleet.cli.common import EXIT_OK, UsageError


def add_checkpoint_parser(subs) -> None:
    ck = subs.add_parser(
        "checkpoint", help="inspect or upgrade a checkpoint folder",
        description="Look into a checkpoint without loading it, or rewrite one of an older format.",
        epilog="examples:\n  rlfleet checkpoint inspect ~/rlfleet_results/PPO_CartPole-v1_.../checkpoint_10\n"
               "  rlfleet checkpoint upgrade old/checkpoint_10 --out new/checkpoint_10",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ck.set_defaults(func=_no_action, subparser=ck, verbose=0)
    actions = ck.add_subparsers(dest="checkpoint_command", metavar="ACTION")

    show = actions.add_parser(
        "inspect", help="algorithm, policies, spaces, sizes and format version of a checkpoint",
        description="Print what a checkpoint holds, read from its manifest and state index (JSON) alone: no "
                    "class it names is imported and no weights are loaded, so any checkpoint is safe to inspect. "
                    "Each file's size is checked against the manifest (--verify: its SHA-256 too).")
    show.add_argument("path", metavar="PATH", help="a checkpoint folder")
    show.add_argument("--verify", action="store_true", default=False,
                         help="also check every file's SHA-256 (reads every file)")
    show.add_argument("--json", action="store_true", default=False, help="print the summary as JSON")
    show.set_defaults(func=cmd_inspect, subparser=show, verbose=0)

    upgrade = actions.add_parser(
        "upgrade", help="rewrite a checkpoint of an older format in the current one",
        description="Apply the format migrations this rlfleet knows and write the checkpoint in the current "
                    "format: in place (the new folder replaces the old one atomically), or into --out.")
    upgrade.add_argument("path", metavar="PATH", help="a checkpoint folder")
    upgrade.add_argument("--out", metavar="DIR", help="write the upgraded checkpoint to this new folder instead")
    upgrade.set_defaults(func=cmd_upgrade, subparser=upgrade, verbose=0)


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError("name an action: inspect or upgrade (rlfleet checkpoint inspect PATH)")


def cmd_inspect(args: argparse.Namespace) -> int:
    from rlfleet.checkpoint.summary import damaged_files, describe_checkpoint, format_summary
    from rlfleet.utils.safe_files import CheckpointError

    try:
        summary = describe_checkpoint(args.path, verify=args.verify)
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None
    print(json.dumps(summary, indent=2) + "\n" if args.json else format_summary(summary), end="", flush=True)
    damaged = damaged_files(summary)
    if damaged:
        raise UsageError(f"checkpoint {summary['path']!r} is damaged: {', '.join(damaged)}; it will not load "
                         "(use another checkpoint of the run, or a copy)")
    return EXIT_OK


def cmd_upgrade(args: argparse.Namespace) -> int:
    from rlfleet.checkpoint.upgrade import upgrade_checkpoint
    from rlfleet.utils.safe_files import CheckpointError

    try:
        report = upgrade_checkpoint(args.path, out=args.out)
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None
    if report.written is None:
        print(f"{report.source}: already format version {report.to_version} (current); nothing to do", flush=True)
    elif not report.migrations:
        print(f"{report.source}: already format version {report.to_version}; copied to {report.written}", flush=True)
    else:
        steps = "".join(f"\n  {report.from_version + i} -> {report.from_version + i + 1}: {d}"
                        for i, d in enumerate(report.migrations))
        print(f"Upgraded {report.source} from format version {report.from_version} to {report.to_version}; "
              f"wrote {report.written}{steps}", flush=True)
    return EXIT_OK


__all__ = ["add_checkpoint_parser", "cmd_inspect", "cmd_upgrade"]
