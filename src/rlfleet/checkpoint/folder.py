"""The checkpoint folder format: write atomically, verify on load, list and prune.

This module knows files, not trainers: a state tree goes in, the same tree comes out (see
`rlfleet.checkpoint` for the layout). A save writes into a hidden folder beside the target,
fsyncs every file, writes the manifest last and renames the folder into place, so an
interrupted save leaves either the previous checkpoint or the new one, never half of one; a
save that fails with an OSError (a full disk) removes its partial files and raises
`CheckpointSaveError` naming the folder. A load reads only the files the manifest lists,
checks each one's size and checksum first, and parses only JSON and safetensors.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from rlfleet.checkpoint.migrations import migrate
from rlfleet.utils.safe_files import (
    CheckpointError,
    CheckpointSaveError,
    clean_stale,
    fsync_dir,
    json_bytes,
    parse_json,
    parse_safetensors,
    publish_folder,
    read_small_json,
    read_verified,
    temp_sibling,
    write_safetensors_synced,
    write_synced,
)

logger = logging.getLogger(__name__)

FORMAT = "rlfleet-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STATE_INDEX = "state.json"
_ARRAY = "__array__"
_DATA_SUFFIXES = (".json", ".safetensors")
_NAME_RE = re.compile(r"checkpoint_(\d+)")


# --- arrays <-> JSON ---------------------------------------------------------------
def _policy_folder(pid: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", pid) and pid not in (".", ".."):
        return pid
    return "policy_" + hashlib.sha256(pid.encode("utf-8")).hexdigest()[:16]


def _route(path: Tuple[str, ...], folders: Dict[str, str]) -> Tuple[str, str]:
    """(file, key) an array at `path` of the state is stored under."""
    if path[:1] == ("replay_buffers",) and len(path) >= 2:
        return f"replay_buffers/{_policy_folder(path[1])}.safetensors", "/".join(path[2:])
    if path[:1] == ("worker",):
        path = path[1:]
    if len(path) >= 3 and path[0] == "policies":
        folder = folders.setdefault(path[1], _policy_folder(path[1]))
        if path[2] == "weights":
            return f"policies/{folder}/weights.safetensors", "/".join(path[3:])
        return f"policies/{folder}/state.safetensors", "/".join(path[2:])
    if path and path[0] == "filters":
        return "filters.safetensors", "/".join(path[1:])
    return "state.safetensors", "/".join(path)


def split_arrays(tree: Any, folders: Optional[Dict[str, str]] = None
                 ) -> Tuple[Any, Dict[str, Dict[str, np.ndarray]]]:
    """Splits a state tree into JSON (arrays replaced by references) and arrays per file."""
    folders = {} if folders is None else folders
    files: Dict[str, Dict[str, np.ndarray]] = {}

    def walk(value: Any, path: Tuple[str, ...]) -> Any:
        if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
            value = value.detach().cpu().numpy()
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise TypeError(f"state at {'/'.join(path)!r} is an object array; checkpoints hold numeric arrays only")
            rel, key = _route(path, folders)
            files.setdefault(rel, {})[key] = value
            return {_ARRAY: {"file": rel, "key": key}}
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, Mapping):
            return {str(k): walk(v, path + (str(k),)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v, path + (str(i),)) for i, v in enumerate(value)]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"state at {'/'.join(path)!r} holds a {type(value).__name__}; checkpoints hold "
                        "NumPy arrays, numbers, strings, lists and dicts only")

    return walk(tree, ()), files


def join_arrays(tree: Any, load_file) -> Any:
    """Inverse of `split_arrays`; `load_file(rel) -> {key: array}`."""
    if isinstance(tree, dict):
        ref = tree.get(_ARRAY)
        if ref is not None and len(tree) == 1:
            if not isinstance(ref, dict) or not isinstance(ref.get("file"), str) or not isinstance(ref.get("key"), str):
                raise CheckpointError(f"{STATE_INDEX} holds a malformed array reference {ref!r}")
            arrays = load_file(ref["file"])
            if ref["key"] not in arrays:
                raise CheckpointError(f"{STATE_INDEX} refers to tensor {ref['key']!r} in {ref['file']!r}, "
                                      "which that file does not hold")
            return arrays[ref["key"]]
        return {k: join_arrays(v, load_file) for k, v in tree.items()}
    if isinstance(tree, list):
        return [join_arrays(v, load_file) for v in tree]
    return tree


# --- folder write / read -------------------------------------------------------------
def write_checkpoint(path: str, manifest: Dict[str, Any], state: Any) -> str:
    """Writes a checkpoint folder at `path` atomically (see the module docstring).

    Args:
        path: the checkpoint folder to create (an existing one is replaced).
        manifest: the manifest fields; `format`, `format_version`, `files` and
            `state_index` are filled in here.
        state: what goes to state.json and the safetensors files: `{"worker": the worker
            state, ...}` (nested dicts of arrays and JSON-able scalars).

    Returns:
        `path`.
    """
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    folders = {pid: _policy_folder(pid) for pid in (state["worker"].get("policies") or {})}
    index, files = split_arrays(state, folders)
    tmp = temp_sibling(path)
    doing = "creating the folder"
    try:
        os.makedirs(parent, exist_ok=True)
        clean_stale(parent)
        os.mkdir(tmp)
        records: Dict[str, Any] = {}
        for rel, arrays in sorted(files.items()):
            doing = f"writing {rel}"
            records[rel] = write_safetensors_synced(os.path.join(tmp, *rel.split("/")), arrays)
        doing = f"writing {STATE_INDEX}"
        records[STATE_INDEX] = write_synced(os.path.join(tmp, STATE_INDEX), json_bytes(index))
        for root, dirs, _ in os.walk(tmp):
            for d in dirs:
                fsync_dir(os.path.join(root, d))
        full = dict(manifest, format=FORMAT, format_version=FORMAT_VERSION, state_index=STATE_INDEX,
                    policy_folders=folders, files=records)
        # The manifest goes last: a folder without one is never a checkpoint.
        doing = f"writing {MANIFEST}"
        write_synced(os.path.join(tmp, MANIFEST), json_bytes(full))
        doing = "moving the finished folder into place"
        publish_folder(tmp, path)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        message = (f"saving the checkpoint {path!r} failed while {doing}: {exc}. Nothing was saved; the "
                   f"checkpoints already in {parent!r} are intact and this save's partial files were removed "
                   "(free some space, or save elsewhere with save(checkpoint_dir=...))")
        raise (CheckpointSaveError(exc.errno, message) if exc.errno is not None
               else CheckpointSaveError(message)) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


@dataclass
class Checkpoint:
    """A verified checkpoint: its manifest and the state of state.json (`{"worker": ..., ...}`,
    arrays loaded); `trainer_state(ck)` joins the two into a trainer state."""

    path: str
    manifest: Dict[str, Any]
    state: Dict[str, Any]


def read_manifest(path: str) -> Dict[str, Any]:
    """The manifest of the checkpoint folder `path`, with its format checked."""
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(f"a checkpoint path must be a folder path, got {path!r}")
    path = os.fspath(path)
    if os.path.isfile(path) and os.path.basename(path) == MANIFEST:
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise CheckpointError(f"no checkpoint folder at {path!r}")
    if not os.path.isfile(os.path.join(path, MANIFEST)):
        raise CheckpointError(f"{path!r} is not an rlfleet checkpoint: it has no {MANIFEST} (an interrupted "
                              "save, or not a checkpoint folder)")
    manifest = read_small_json(os.path.join(path, MANIFEST), "checkpoint")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{os.path.join(path, MANIFEST)!r} is not an rlfleet checkpoint manifest "
                              f"(format {manifest.get('format') if isinstance(manifest, dict) else None!r}, "
                              f"expected {FORMAT!r})")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"checkpoint {path!r} has an invalid format_version {version!r}")
    if version > FORMAT_VERSION:
        from rlfleet import __version__

        raise CheckpointError(
            f"checkpoint {path!r} has format version {version} (written by rlfleet "
            f"{manifest.get('rlfleet_version', '?')}); this rlfleet {__version__} reads format versions up to "
            f"{FORMAT_VERSION}: upgrade rlfleet to load it")
    for key, kind in (("files", dict), ("algorithm", str), ("iteration", int), ("state_index", str)):
        if not isinstance(manifest.get(key), kind):
            raise CheckpointError(f"checkpoint manifest {os.path.join(path, MANIFEST)!r} lacks a valid "
                                  f"{key!r} entry")
    return manifest


def read_checkpoint(path: str) -> Checkpoint:
    """Reads and verifies the checkpoint folder `path` (every listed file's size and SHA-256);
    a checkpoint of an older format comes back as the current format holds it
    (`rlfleet.checkpoint.migrations`).

    Raises:
        CheckpointError: missing or corrupted files, an unknown or newer format, or files of a
            type a checkpoint never holds.
    """
    path = os.fspath(path)
    if os.path.basename(path) == MANIFEST:
        path = os.path.dirname(path)
    manifest = read_manifest(path)
    where = os.path.join(path, MANIFEST)
    files = manifest["files"]
    data: Dict[str, bytes] = {}
    for rel, record in files.items():
        if not str(rel).endswith(_DATA_SUFFIXES):
            raise CheckpointError(f"{where} lists the file {rel!r}, of a type rlfleet checkpoints never hold "
                                  f"(only {list(_DATA_SUFFIXES)}; loading never unpickles)")
        if not isinstance(record, dict):
            raise CheckpointError(f"{where} has a malformed entry for {rel!r}")
        data[rel] = read_verified(path, rel, record, where)
    index_name = manifest["state_index"]
    if index_name not in data or not index_name.endswith(".json"):
        raise CheckpointError(f"{where}: the state index {index_name!r} is not among its checksummed JSON files")
    parsed: Dict[str, Dict[str, np.ndarray]] = {}

    def load_file(rel: str) -> Dict[str, np.ndarray]:
        if rel not in data or not rel.endswith(".safetensors"):
            raise CheckpointError(f"{index_name} refers to {rel!r}, which is not a safetensors file listed "
                                  f"in {where}")
        if rel not in parsed:
            parsed[rel] = parse_safetensors(data[rel], os.path.join(path, rel))
        return parsed[rel]

    state = join_arrays(parse_json(data[index_name], os.path.join(path, index_name)), load_file)
    manifest, state = migrate(manifest, state, FORMAT_VERSION, path)  # an older format's content, as today's
    if not isinstance(state, dict) or not isinstance(state.get("worker"), dict) \
            or not isinstance(state["worker"].get("policies"), dict):
        raise CheckpointError(f"{os.path.join(path, index_name)!r} holds no policy states")
    return Checkpoint(path=path, manifest=manifest, state=state)


def list_checkpoints(parent: str) -> List[str]:
    """The checkpoint folders (`checkpoint_<iteration>` with a manifest) in `parent`, oldest
    iteration first. Hidden temp folders of unfinished saves are never listed."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    found = []
    for name in names:
        match = _NAME_RE.fullmatch(name)
        if match and os.path.isfile(os.path.join(parent, name, MANIFEST)):
            found.append((int(match.group(1)), os.path.join(parent, name)))
    return [p for _, p in sorted(found)]


def prune_checkpoints(parent: str, keep: int, protect: Optional[str] = None) -> List[str]:
    """Deletes all but the `keep` newest checkpoints in `parent` (never `protect`); returns
    the deleted paths (each removed by `remove_checkpoint`)."""
    if keep is None or keep < 1:
        raise ValueError(f"keep_checkpoints_num must be an int >= 1, got {keep!r}")
    existing = list_checkpoints(parent)
    protect = os.path.abspath(protect) if protect else None
    doomed = [p for p in existing[:-keep] if os.path.abspath(p) != protect] if len(existing) > keep else []
    for p in doomed:
        remove_checkpoint(p)
    return doomed


def remove_checkpoint(path: str) -> None:
    """Deletes the checkpoint folder `path`, renamed aside first: a crash mid-way never
    leaves a half-deleted folder under a checkpoint's name."""
    aside = temp_sibling(path)
    os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)
