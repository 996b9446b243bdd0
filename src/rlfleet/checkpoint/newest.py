"""The newest intact checkpoint of a run folder: where a resumed run starts.

A run folder holds `checkpoint_<iteration>/` folders (see `rlfleet.checkpoint`). Saves are
atomic, so a kill mid-save leaves only a hidden temp folder, never listed; a checkpoint damaged
afterwards (a disk error, a file truncated by hand) fails its checksums when read, and the one
before it is taken instead, naming the one skipped and why.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from rlfleet.checkpoint.folder import MANIFEST, Checkpoint, list_checkpoints, read_checkpoint
from rlfleet.utils.safe_files import CheckpointError


@dataclass
class NewestCheckpoint:
    """`checkpoint`: the newest intact checkpoint, or None; `skipped`: (path, why) of the
    newer ones that could not be read."""

    checkpoint: Optional[Checkpoint]
    skipped: List[Tuple[str, str]] = field(default_factory=list)


def is_checkpoint_folder(path: str) -> bool:
    """Whether `path` is a checkpoint folder (it holds a manifest), not a folder of them."""
    return os.path.isfile(os.path.join(path, MANIFEST))


def newest_intact_checkpoint(run_dir: str) -> NewestCheckpoint:
    """Reads `run_dir`'s checkpoints newest first; the first that verifies is the answer.

    Args:
        run_dir: a folder holding `checkpoint_<iteration>/` folders (a run folder).
    """
    found = NewestCheckpoint(None)
    for path in reversed(list_checkpoints(run_dir)):
        try:
            found.checkpoint = read_checkpoint(path)
            return found
        except CheckpointError as exc:
            found.skipped.append((path, str(exc)))
    return found
