"""A trainer checkpoint as bytes (`Trainer.save_to_object` / `restore_from_object`).

The bytes are a ZIP archive (stored, not compressed: safetensors barely compress) of one
checkpoint folder exactly as `rlfleet.checkpoint` writes it: `manifest.json`, `state.json`
and the safetensors files, at the archive's top level. Restoring extracts it into a temporary
folder and restores from there, so the folder's checks all apply (sizes and SHA-256 of every
file against the manifest, JSON and safetensors only: nothing is unpickled, no code runs).

Before extracting, each entry name is checked: a relative path without `..`, no links, no more
entries or bytes than a checkpoint would hold (a damaged or hostile archive cannot write outside
the temporary folder or fill the disk).
"""
from __future__ import annotations

import io
import os
import stat
import tempfile
import zipfile
from typing import Any

from rlfleet.checkpoint.folder import MANIFEST
from rlfleet.checkpoint.trainer_io import restore_trainer, save_trainer
from rlfleet.utils.safe_files import CheckpointError

# What `restore_from_object` accepts as an archive: generous for any real checkpoint
# (replay buffers included), small enough that a bogus archive cannot fill the disk.
MAX_ENTRIES = 100_000
MAX_TOTAL_BYTES = 64 * 1024 ** 3

_NOT_OURS = ("the bytes are not a checkpoint written by Trainer.save_to_object (a ZIP archive of a checkpoint "
             "folder with a manifest.json)")


def checkpoint_to_bytes(trainer: Any) -> bytes:
    """`trainer`'s checkpoint (as `Trainer.save` writes it) as the bytes of a ZIP archive."""
    with tempfile.TemporaryDirectory(prefix="rlfleet_save_to_object_") as tmp:
        folder = save_trainer(trainer, tmp)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
            for root, _, files in os.walk(folder):
                for name in sorted(files):
                    path = os.path.join(root, name)
                    archive.write(path, arcname=os.path.relpath(path, folder).replace(os.sep, "/"))
        return buffer.getvalue()


def restore_from_bytes(trainer: Any, data: Any) -> None:
    """Restores `trainer` from the bytes of `checkpoint_to_bytes` (see the module docstring).

    Raises:
        CheckpointError: `data` is not such bytes, or the checkpoint in it is damaged or does
            not fit the trainer; the trainer is unchanged then.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"restore_from_object expects the bytes of save_to_object, got {type(data).__name__}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise CheckpointError(f"{_NOT_OURS}: {exc}") from None
    with archive, tempfile.TemporaryDirectory(prefix="rlfleet_restore_from_object_") as tmp:
        folder = os.path.join(tmp, "checkpoint")
        _extract(archive, folder)
        restore_trainer(trainer, folder)


def _extract(archive: zipfile.ZipFile, folder: str) -> None:
    entries = archive.infolist()
    names = {e.filename for e in entries}
    if MANIFEST not in names:
        raise CheckpointError(f"{_NOT_OURS}: it has no {MANIFEST} (entries: {sorted(names)[:5]})")
    if len(entries) > MAX_ENTRIES or sum(e.file_size for e in entries) > MAX_TOTAL_BYTES:
        raise CheckpointError(f"{_NOT_OURS}: {len(entries)} entries of {sum(e.file_size for e in entries)} bytes "
                              f"is more than a checkpoint holds (at most {MAX_ENTRIES}, {MAX_TOTAL_BYTES} bytes)")
    for entry in entries:
        parts = entry.filename.split("/")
        mode = entry.external_attr >> 16
        if (entry.filename.startswith("/") or "\\" in entry.filename or any(p in ("", ".", "..") for p in parts[:-1])
                or parts[-1] in ("", ".", "..") or stat.S_ISLNK(mode)):
            raise CheckpointError(f"{_NOT_OURS}: the entry {entry.filename!r} is not a plain relative file path")
    os.makedirs(folder)
    for entry in entries:
        target = os.path.join(folder, *entry.filename.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            with archive.open(entry) as src, open(target, "wb") as dst:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    dst.write(chunk)
        except (zipfile.BadZipFile, EOFError, OSError) as exc:  # a truncated or corrupted archive
            raise CheckpointError(f"{_NOT_OURS}: reading {entry.filename!r} failed: {exc}") from None
