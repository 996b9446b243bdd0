"""Where rlfleet's checkpoint folder is, given what a user holds: a path, or a Ray Tune
`Checkpoint` (what `ResultGrid.get_best_result().checkpoint` returns in Ray 2.x).

A Tune `Checkpoint` is a folder on a (pyarrow) filesystem with `.path`, `.filesystem` and
`to_directory()` (Ray's python/ray/train/_checkpoint.py, exported as `tune.Checkpoint`);
`rlfleet.tune`'s trainable writes rlfleet's own folder, `checkpoint_<iteration>/`, inside it.
It is recognised by its class (a `Checkpoint` from Ray's package, or a subclass of one), so that
loading a checkpoint never imports Ray and probes no object.
"""
from __future__ import annotations

import os
from typing import Any

from rlfleet.checkpoint.folder import MANIFEST, list_checkpoints
from rlfleet.utils.safe_files import CheckpointError


def is_tune_checkpoint(checkpoint: Any) -> bool:
    # Checked before os.PathLike: Tune's Checkpoint defines __fspath__ only to raise.
    return any(c.__name__ == "Checkpoint" and c.__module__.split(".")[0] == "ray" for c in type(checkpoint).__mro__)


def _local_folder(checkpoint: Any) -> str:
    if is_tune_checkpoint(checkpoint):
        if checkpoint.filesystem.type_name == "local":  # a pyarrow FileSystem
            return os.fspath(checkpoint.path)
        return checkpoint.to_directory()  # remote storage (S3, GCS, ...): a local copy first
    if isinstance(checkpoint, (str, os.PathLike)):
        return os.fspath(checkpoint)
    raise TypeError(f"expected a checkpoint folder (a path) or a Ray Tune Checkpoint, got {checkpoint!r}")


def checkpoint_folder(checkpoint: Any) -> str:
    """rlfleet's checkpoint folder for `checkpoint`: the folder itself when it holds a
    manifest, else the newest `checkpoint_<iteration>/` inside it (a Tune checkpoint's folder,
    as a `Checkpoint` or as its `.path`).

    Args:
        checkpoint: a path (str or PathLike; a manifest.json file names its folder) or a Ray
            Tune `Checkpoint`.

    Raises:
        TypeError: `checkpoint` is neither.
        CheckpointError: a Tune `Checkpoint` that holds no rlfleet checkpoint (a path that
            holds none is returned as it is: reading it says what is missing).
    """
    path = _local_folder(checkpoint)
    if os.path.isfile(os.path.join(path, MANIFEST)) or os.path.basename(path) == MANIFEST:
        return path
    found = list_checkpoints(path)
    if found:
        return found[-1]
    if not is_tune_checkpoint(checkpoint):
        return path  # reading it names what is missing
    raise CheckpointError(f"the Tune checkpoint {path!r} holds no rlfleet checkpoint (a checkpoint_<n>/ "
                          f"folder with a {MANIFEST}); it was not written by rlfleet.tune")
