"""`rlfleet checkpoint upgrade PATH`: rewrites a checkpoint of an older format in the current one.

The checkpoint is read and verified as any load reads it (`read_checkpoint`, which applies the
migrations of `rlfleet.checkpoint.migrations` in memory) and written back with
`write_checkpoint`: in place by default (the new folder replaces the old one by rename, so an
interrupted upgrade leaves the old checkpoint), or as a new folder with `out`. The manifest
keeps what it recorded (algorithm, config, versions, counters) and notes the upgrade under
"upgraded_from".
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import List, Optional

from rlfleet.checkpoint.folder import FORMAT_VERSION, MANIFEST, read_checkpoint, read_manifest, write_checkpoint
from rlfleet.checkpoint.migrations import MIGRATED_FROM, pending
from rlfleet.utils.safe_files import CheckpointError

# The manifest entries `write_checkpoint` fills in itself.
_ENVELOPE = ("format", "format_version", "files", "state_index", "policy_folders", MIGRATED_FROM)


@dataclass
class Upgrade:
    """What `upgrade_checkpoint` did.

    Attributes:
        source: the checkpoint read.
        written: the checkpoint written (None: it was current already, nothing written).
        from_version, to_version: its format version before and after.
        migrations: the descriptions of the migrations applied, in order.
    """

    source: str
    written: Optional[str]
    from_version: int
    to_version: int
    migrations: List[str] = field(default_factory=list)


def upgrade_checkpoint(path: str, out: Optional[str] = None) -> Upgrade:
    """Rewrites the checkpoint folder `path` in the current format (see the module docstring).

    Args:
        path: a checkpoint folder (or its manifest.json).
        out: write the upgraded checkpoint to this new folder and leave `path` as it is; None:
            replace `path` (nothing is written when it is current already).

    Raises:
        CheckpointError: not a checkpoint, damaged, of a newer format, of a format no
            migration leads from, or `out` exists already.
    """
    path = os.fspath(path)
    if os.path.basename(path) == MANIFEST:
        path = os.path.dirname(path)
    version = read_manifest(path)["format_version"]
    try:
        steps = pending(version, FORMAT_VERSION)
    except CheckpointError as exc:
        raise CheckpointError(f"checkpoint {path!r}: {exc}") from None
    report = Upgrade(source=path, written=None, from_version=version, to_version=FORMAT_VERSION,
                     migrations=[s.description for s in steps])
    if out is not None and os.path.exists(out):
        raise CheckpointError(f"{out!r} exists already: upgrade writes a new folder there (name one that does "
                              "not exist, or leave out --out to upgrade the checkpoint in place)")
    if not steps and out is None:
        return report
    ck = read_checkpoint(path)
    manifest = {k: v for k, v in ck.manifest.items() if k not in _ENVELOPE}
    if steps:
        from rlfleet import __version__

        manifest["upgraded_from"] = {
            "format_version": version, "rlfleet_version": ck.manifest.get("rlfleet_version"),
            "by_rlfleet_version": __version__, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "migrations": report.migrations}
    report.written = write_checkpoint(out if out is not None else path, manifest, ck.state)
    return report
