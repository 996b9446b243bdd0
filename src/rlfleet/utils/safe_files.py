"""Files that never run code when read: atomic folder writes, checksums, verified reads.

Checkpoints and exported weights are written as a folder of JSON and `safetensors` files.
Everything here reads only those two formats; nothing is ever unpickled. Used by
`rlfleet.checkpoint` (the trainer checkpoint format) and `rlfleet.policy.export`.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
from typing import Any, Dict, Mapping, Optional

import numpy as np

# A manifest or index larger than this is not one of ours.
MAX_JSON_BYTES = 64 << 20


class CheckpointError(ValueError):
    """A checkpoint or exported-weights file that cannot be loaded; says which file and why."""


class CheckpointSaveError(OSError):
    """A save that failed with an OSError while writing (e.g. a full disk): says which folder
    and why. The previous checkpoints are intact and the save's partial files are removed;
    the original error is chained (`__cause__`) and its `errno` kept."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(path: str) -> None:
    """Makes the entries of folder `path` (new files, renames) durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open folders; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_synced(path: str, data: bytes) -> Dict[str, Any]:
    """Writes `data` to `path`, fsyncs it, and returns `{"sha256", "size"}` for a manifest."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return {"sha256": sha256_hex(data), "size": len(data)}


def write_safetensors_synced(path: str, arrays: Mapping[str, np.ndarray]) -> Dict[str, Any]:
    """Writes `arrays` as a safetensors file straight to disk (no copy of the whole file in
    memory, which matters for replay buffers), fsyncs it, returns `{"sha256", "size"}`."""
    from safetensors.numpy import save_file

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    save_file(_c_order(arrays), path)
    digest, size = hashlib.sha256(), 0
    with open(path, "rb+") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
        os.fsync(f.fileno())
    return {"sha256": digest.hexdigest(), "size": size}


def _c_order(arrays: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    # Not np.ascontiguousarray: it turns 0-d arrays (e.g. Adam's `step`) into 1-d ones.
    return {k: np.array(v, order="C", copy=not v.flags.c_contiguous) for k, v in arrays.items()}


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True).encode("utf-8")


def safetensors_bytes(arrays: Mapping[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """`arrays` in the safetensors format (no code, just a JSON header and raw buffers)."""
    from safetensors.numpy import save

    return save(_c_order(arrays), metadata=metadata)


def parse_safetensors(data: bytes, where: str) -> Dict[str, np.ndarray]:
    from safetensors.numpy import load

    try:
        return load(data)
    except Exception as exc:  # safetensors raises its own SafetensorError
        raise CheckpointError(f"{where} is not a valid safetensors file ({exc})") from None


def parse_json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{where} is not valid JSON ({exc})") from None


def safe_join(root: str, rel: str, where: str) -> str:
    """`root/rel` for a relative path that stays inside `root` (no '..', no absolute paths)."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or "\\" in rel \
            or any(part in ("", ".", "..") for part in rel.split("/")):
        raise CheckpointError(f"{where} names the file {rel!r}, which is not a plain relative path "
                              "inside the checkpoint folder")
    path = os.path.join(root, *rel.split("/"))
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
        raise CheckpointError(f"{where} names the file {rel!r}, which points outside the checkpoint folder")
    return path


def read_verified(root: str, rel: str, expected: Mapping[str, Any], where: str) -> bytes:
    """Reads `root/rel` and checks its size and SHA-256 against `expected` (from a manifest).

    Raises:
        CheckpointError: the file is missing, truncated, or its bytes changed.
    """
    path = safe_join(root, rel, where)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {root!r} is incomplete: the file {rel!r} listed in {where} is missing")
    size = expected.get("size")
    actual_size = os.path.getsize(path)
    if isinstance(size, int) and actual_size != size:
        raise CheckpointError(
            f"checkpoint file {rel!r} in {root!r} is truncated or corrupted: {actual_size} bytes, "
            f"{where} records {size}")
    with open(path, "rb") as f:
        data = f.read()
    digest = sha256_hex(data)
    if digest != expected.get("sha256"):
        raise CheckpointError(
            f"checkpoint file {rel!r} in {root!r} is corrupted: its SHA-256 is {digest}, "
            f"{where} records {expected.get('sha256')}")
    return data


def read_small_json(path: str, where: str) -> Any:
    if not os.path.isfile(path):
        raise CheckpointError(f"{where}: {path!r} does not exist")
    if os.path.getsize(path) > MAX_JSON_BYTES:
        raise CheckpointError(f"{where}: {path!r} is larger than {MAX_JSON_BYTES} bytes; not an rlfleet file")
    with open(path, "rb") as f:
        return parse_json(f.read(), path)


def check_weights_fit(saved: Mapping[str, Any], own: Mapping[str, Any], where: str) -> None:
    """Raises CheckpointError naming each missing, unexpected or differently shaped tensor."""
    missing, unexpected = sorted(set(own) - set(saved)), sorted(set(saved) - set(own))
    if missing or unexpected:
        raise CheckpointError(f"{where} does not match the model: tensors missing from the file {missing}, "
                              f"unexpected tensors {unexpected}")
    for name in own:  # in the model's order: the first layer that differs is named
        value = saved[name]
        if tuple(np.shape(value)) != tuple(np.shape(own[name])):
            raise CheckpointError(
                f"{where}: tensor {name!r} has shape {tuple(np.shape(value))} in the checkpoint, but the "
                f"model expects {tuple(np.shape(own[name]))} (was the model config changed?)")


# --- atomic folders --------------------------------------------------------------
_HOST = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"


def temp_sibling(target: str, kind: str = "tmp") -> str:
    """A hidden folder name beside `target`, tagged with host and pid (see `clean_stale`)."""
    parent, name = os.path.split(os.path.abspath(target))
    return os.path.join(parent, f".{name}.{kind}-{_HOST}-{os.getpid()}-{secrets.token_hex(4)}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: somebody else's live process
        return True
    return True


def clean_stale(parent: str) -> None:
    """Removes temp folders that killed saves on this host left in `parent`; a swapped-out
    previous checkpoint whose replacement never arrived is moved back into place."""
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    for entry in entries:
        if not entry.startswith("."):
            continue
        for kind in ("tmp", "old"):
            marker = f".{kind}-{_HOST}-"
            if marker not in entry:
                continue
            pid_text = entry.split(marker, 1)[1].split("-", 1)[0]
            if not pid_text.isdigit() or _pid_alive(int(pid_text)):
                continue
            path = os.path.join(parent, entry)
            original = os.path.join(parent, entry[1:].split(f".{kind}-", 1)[0])
            if kind == "old" and not os.path.exists(original):
                os.rename(path, original)
            else:
                shutil.rmtree(path, ignore_errors=True)


def write_file_atomic(path: str, data: bytes) -> Dict[str, Any]:
    """Writes `path` through a temp file and a rename: readers see the old or the new file,
    never part of one. Returns `{"sha256", "size"}`."""
    tmp = temp_sibling(path)
    try:
        record = write_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    fsync_dir(os.path.dirname(os.path.abspath(path)))
    return record


def publish_folder(tmp: str, target: str) -> None:
    """Moves the finished folder `tmp` to `target` by rename (atomic on one file system).

    An existing `target` is first renamed aside and deleted afterwards: at every moment
    either the old or the new folder is complete (`clean_stale` repairs the one gap).
    """
    parent = os.path.dirname(os.path.abspath(target))
    fsync_dir(tmp)
    old = None
    if os.path.exists(target):
        old = temp_sibling(target, "old")
        os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        if old is not None:  # put the previous folder back
            os.rename(old, target)
        raise
    fsync_dir(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = [
    "CheckpointError", "CheckpointSaveError", "sha256_hex", "fsync_dir", "write_synced", "write_safetensors_synced",
    "json_bytes",
    "safetensors_bytes", "parse_safetensors", "parse_json", "safe_join", "read_verified", "read_small_json",
    "temp_sibling", "clean_stale", "publish_folder", "check_weights_fit", "write_file_atomic",
]
