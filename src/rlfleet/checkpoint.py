"""Trainer checkpoints: a folder of JSON and safetensors files that loading never executes.

    checkpoint_<iteration>/
      manifest.json                              format and rlfleet version, algorithm,
                                                 iteration, counters, resume seed, config,
                                                 the SHA-256 and size of every other file
      state.json                                 the rest of the trainer's state
                                                 (`Trainer.get_state()`: the local worker's
                                                 state, replay buffers) with every array
                                                 replaced by {"__array__": {file, key}}:
                                                 policy counters, exploration, optimizer
                                                 hyperparameters, NumPy RNG states, filters
      policies/<policy_id>/weights.safetensors   the model's state_dict
      policies/<policy_id>/state.safetensors     optimizer moments and steps, torch RNG state
      filters.safetensors                        observation-filter statistics
      replay_buffers/<policy_id>.safetensors     with `store_buffer_in_checkpoints` only: each
                                                 trained policy's replay buffer (checkpoints
                                                 of older versions may hold the default
                                                 policy's as replay_buffer.safetensors)

The trainer owns what its state holds (`Trainer.get_state` / `set_state`); this module only
maps that state to and from the folder.

A save writes into a hidden folder beside the target, fsyncs every file, writes the
manifest last and renames the folder into place, so an interrupted save leaves either the
previous checkpoint or the new one, never half of one; a save that fails with an OSError (a
full disk) removes its partial files and raises `CheckpointSaveError` naming the folder.
A load reads only the files the manifest lists, checks each one's size and checksum first,
and parses only JSON and safetensors: nothing is unpickled, no code runs.

`Trainer.from_checkpoint` rebuilds the config, whose classes and functions are recorded by
name. Importing a module runs it, so before importing anything it checks every name the
config would import against `rlfleet.utils.json_codec.ImportTrust` (rlfleet, gymnasium,
modules of the user's own code already imported, and `trusted_modules`): recorded classes
and functions, and strings rlfleet imports by name, at any depth (`env` class paths and
"module:Id" ids, `exploration_config.type` and `logger_config.type` paths). Anything else is
a `CheckpointError` naming the key, the name and the two fixes (`config_overrides`,
`trusted_modules`); nothing is imported. rlfleet's entry points (the CLI, Tune, trainer
classes), which act on whatever they are called with, are never accepted as values.
"""
from __future__ import annotations

import hashlib
import logging
import os
import platform
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.utils.json_codec import (
    DecodeError,
    ImportTrust,
    Untrusted,
    UntrustedImportError,
    decode,
    encode,
    find_untrusted,
    qualified_name,
)
from rlfleet.utils.safe_files import (
    CheckpointError,
    CheckpointSaveError,
    check_weights_fit,
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
    """Reads and verifies the checkpoint folder `path` (every listed file's size and SHA-256).

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
    the deleted paths. A folder is renamed aside before deletion, so a crash mid-way never
    leaves a half-deleted folder under a checkpoint's name."""
    if keep is None or keep < 1:
        raise ValueError(f"keep_checkpoints_num must be an int >= 1, got {keep!r}")
    existing = list_checkpoints(parent)
    protect = os.path.abspath(protect) if protect else None
    doomed = [p for p in existing[:-keep] if os.path.abspath(p) != protect] if len(existing) > keep else []
    for p in doomed:
        aside = temp_sibling(p)
        os.rename(p, aside)
        shutil.rmtree(aside, ignore_errors=True)
    return doomed


# --- trainers ------------------------------------------------------------------------
def _versions() -> Dict[str, str]:
    import gymnasium
    import safetensors
    import torch

    from rlfleet import __version__

    return {"rlfleet": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "gymnasium": gymnasium.__version__, "safetensors": safetensors.__version__}


# The trainer-state entries (see `Trainer.get_state`) the manifest holds; every other entry
# goes to state.json, its arrays to safetensors files.
_MANIFEST_STATE_KEYS = ("algorithm", "iteration", "counters", "episodes_total", "time_total_s", "resume_seed")


def _split_state(state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A trainer state as (manifest entries, state.json tree)."""
    head = {k: state[k] for k in _MANIFEST_STATE_KEYS if k in state}
    return head, {k: v for k, v in state.items() if k not in _MANIFEST_STATE_KEYS}


def trainer_state(ck: Checkpoint) -> Dict[str, Any]:
    """The trainer state (`Trainer.set_state` input) a checkpoint holds."""
    state = {k: ck.manifest[k] for k in _MANIFEST_STATE_KEYS if k in ck.manifest}
    state.update(ck.state)
    # Checkpoints written before buffers were kept per policy hold the default policy's
    # buffer apart, as "replay_buffer".
    if "replay_buffer" in state:
        state["replay_buffers"] = {DEFAULT_POLICY_ID: state.pop("replay_buffer"), **(state.get("replay_buffers") or {})}
    return state


def save_trainer(trainer, checkpoint_dir: Optional[str] = None, keep_checkpoints_num: Optional[int] = None) -> str:
    """Writes `trainer.get_state()` to `<checkpoint_dir or trainer.logdir>/checkpoint_<iteration>/`;
    see `Trainer.save`."""
    state = trainer.get_state()
    parent = os.path.abspath(checkpoint_dir or trainer.logdir)
    path = os.path.join(parent, f"checkpoint_{int(state['iteration'])}")
    head, body = _split_state(state)
    versions = _versions()
    manifest = {
        "rlfleet_version": versions["rlfleet"],
        "versions": versions,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "trainer_class": qualified_name(type(trainer)),
        **head,
        "policies": {
            pid: {"policy_class": qualified_name(type(trainer.get_policy(pid))),
                  "weights": {k: list(np.shape(v)) for k, v in pstate["weights"].items()}}
            for pid, pstate in body["worker"]["policies"].items()
        },
        "config": encode(trainer.config),
        "user_config": encode(trainer.user_config()),
    }
    write_checkpoint(path, manifest, body)
    if keep_checkpoints_num is not None:
        prune_checkpoints(parent, keep_checkpoints_num, protect=path)
    return path


def restore_trainer(trainer, path: str, checkpoint: Optional[Checkpoint] = None) -> None:
    """Reads, verifies and applies (`trainer.set_state`) the checkpoint at `path`; see
    `Trainer.restore`. Nothing changes when the checkpoint is damaged or does not fit."""
    ck = checkpoint or read_checkpoint(path)
    try:
        trainer.set_state(trainer_state(ck))
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"checkpoint {ck.path!r} does not fit this trainer: {exc}") from exc


def _nested_example(path: str) -> str:
    keys = path.split(".")
    text = "..."
    for key in reversed(keys):
        text = f"{{{key!r}: {text}}}"
    return text


def _env_string_module(text: str) -> Optional[str]:
    """The module resolving the `env` string `text` would import (see `rlfleet.env.registry`);
    None for a registered name or a plain Gymnasium id (registered by code already run)."""
    from rlfleet.env.registry import registered_envs

    if text in registered_envs():
        return None
    if ":" in text:  # "pkg.mod:Class" or Gymnasium's "module:Id-v0": both import the module
        return text.partition(":")[0]
    module, _, attr = text.rpartition(".")
    if module and attr and all(p.isidentifier() for p in text.split(".")):
        return module  # "pkg.mod.Class"
    return None


def _class_path_module(text: str) -> Optional[str]:
    """The module of a class path ("pkg.mod.Class" / "pkg.mod:Class"); None for a plain
    name (a built-in or registered one, looked up without importing)."""
    if ":" in text:
        return text.rpartition(":")[0].replace(":", ".") or None
    return text.rpartition(".")[0] or None


def _string_module(keys: Tuple[str, ...], text: str) -> Optional[str]:
    """The module a string at config `keys` makes rlfleet import, if any: strings under the
    keys rlfleet resolves by importing (`env`, `exploration_config.type`, `logger_config.type`).

    They are looked for at any depth, `env_config` included: a trusted class may be built
    from a nested dict and resolve such a string in turn (a trainer class given as `env` gets
    `env_config` as its config).
    """
    if not keys:
        return None
    if keys[-1] == "env":
        return _env_string_module(text)
    if keys[-1].isdigit():  # an item of a list of class paths
        keys = keys[:-1]
    if len(keys) >= 2 and keys[-1] == "type" and keys[-2] in ("exploration_config", "logger_config"):
        return _class_path_module(text)
    return None


# rlfleet's entry points run commands or build trainers from whatever they are called with (argv,
# a config dict): no config value is one, and naming one would reach untrusted names through
# the back door (`env: rlfleet.cli:main` made with env_config keys as argv).
_ENTRY_POINT_MODULES = ("rlfleet.cli", "rlfleet.tune")


def _is_entry_point(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in _ENTRY_POINT_MODULES)


class _CheckpointTrust(ImportTrust):
    """`ImportTrust` without rlfleet's entry points (even under `trusted_modules=["rlfleet"]`)."""

    def allows(self, module: str) -> bool:
        return not _is_entry_point(module) and super().allows(module)


def _checked_importer(trust: ImportTrust, ck_path: str):
    """`trust.importer()`, refusing rlfleet's entry points: the CLI, Tune, trainer classes."""
    importer = trust.importer()

    def load(name: str, path: str) -> Any:
        obj = importer(name, path)
        from rlfleet.trainer import Trainer

        if isinstance(obj, type) and issubclass(obj, Trainer):
            raise CheckpointError(
                f"Trainer.from_checkpoint({ck_path!r}): config key {path!r} records the trainer class {name!r}; a "
                f"trainer is never a config value (it would build a trainer from its arguments). Pass the right "
                f"value: config_overrides={{{_nested_example(path.split('[')[0])[1:-1]}}}")
        return obj

    return load


def _untrusted_message(ck_path: str, found: List[Untrusted]) -> str:
    entry = [u for u in found if _is_entry_point(u.module)]
    if entry:
        keys = list(dict.fromkeys(u.path.split("[")[0] for u in entry))
        return (f"Trainer.from_checkpoint({ck_path!r}): config key {entry[0].path!r} records {entry[0].name!r}, an "
                "rlfleet entry point (it runs commands from its arguments), which is never a config value; "
                "nothing was imported. Pass the right value: config_overrides={"
                + ", ".join(_nested_example(k)[1:-1] for k in keys) + "}")
    first = found[0]
    packages = sorted({u.module.split(".")[0] for u in found})
    # A list item (e.g. a policy spec's class) is overridden with its whole list.
    keys = list(dict.fromkeys(u.path.split("[")[0] for u in found))
    text = (f"Trainer.from_checkpoint({ck_path!r}): config key {first.path!r} records {first.name!r}, from module "
            f"{first.module!r}, which is not trusted, so it was not imported (importing a module runs its code, "
            "and a checkpoint may come from anyone).")
    for other in found[1:]:
        text += f" Also config key {other.path!r}: {other.name!r}."
    overrides = ", ".join(_nested_example(k)[1:-1] for k in keys)
    return (text + " Loading imports only from rlfleet, gymnasium, your own modules already imported in this "
            f"process, and the modules you trust. To trust this code: trusted_modules={packages!r} (CLI: "
            + " ".join(f"--trust-module {p}" for p in packages)
            + f"); or pass the value yourself: config_overrides={{{overrides}}}.")


def trainer_from_checkpoint(cls: type, algorithm: Optional[str], path: str, config_overrides: Optional[dict] = None,
                            trusted_modules: Optional[Sequence[str]] = None, **trainer_kwargs):
    """Builds a trainer from the manifest alone and restores it; see `Trainer.from_checkpoint`.

    Args:
        cls: the class `from_checkpoint` was called on.
        algorithm: its algorithm name; None (the base class): the checkpoint's algorithm,
            looked up in the registry.
        trusted_modules: modules (packages) whose recorded classes and functions may be
            imported, besides rlfleet, gymnasium and the user's modules already imported.
    """
    trust = _CheckpointTrust(trusted_modules)
    ck = read_checkpoint(path)
    algo = ck.manifest["algorithm"]
    trainer_cls = cls
    if algorithm is None:
        from rlfleet.registry import get_trainer_class

        try:
            trainer_cls = get_trainer_class(algo)
        except ValueError as exc:
            raise CheckpointError(f"checkpoint {ck.path!r} is of algorithm {algo!r}, which is not registered "
                                  f"({exc}); call YourTrainer.from_checkpoint(path) on its class") from None
    elif algorithm != algo:
        raise CheckpointError(
            f"checkpoint {ck.path!r} was written by a {algo} trainer; {cls.__name__}.from_checkpoint cannot "
            f"load it (use Trainer.from_checkpoint(path), which picks the algorithm from the checkpoint)")
    recorded = ck.manifest.get("user_config")
    if not isinstance(recorded, dict):
        raise CheckpointError(f"checkpoint {ck.path!r} records no config to rebuild the trainer from")
    overrides = dict(config_overrides or {})
    # Every name is checked before anything is imported (an untrusted module never runs).
    found = find_untrusted(recorded, trust, overrides, _string_module)
    if found:
        raise CheckpointError(_untrusted_message(ck.path, found))
    try:
        config = decode(recorded, overrides, importer=_checked_importer(trust, ck.path))
    except UntrustedImportError as exc:  # pragma: no cover - find_untrusted saw it first
        raise CheckpointError(_untrusted_message(ck.path, [Untrusted(exc.path, exc.name, exc.module)])) from None
    except DecodeError as exc:
        raise CheckpointError(
            f"Trainer.from_checkpoint({ck.path!r}): {exc}. Pass it in config_overrides, e.g. "
            f"config_overrides={_nested_example(exc.path)}") from None
    try:
        trainer = trainer_cls(config=config, **trainer_kwargs)
    except ValueError as exc:
        if "env=" in str(exc) and "unknown" in str(exc):
            raise CheckpointError(
                f"Trainer.from_checkpoint({ck.path!r}): config key 'env' ({config.get('env')!r}) cannot be "
                f"resolved in this process: {exc}. Register it with register_env(...) first, or pass "
                "config_overrides={'env': ...}") from None
        raise
    try:
        restore_trainer(trainer, ck.path, ck)
    except BaseException:
        trainer.stop()
        raise
    return trainer


__all__ = [
    "CheckpointError", "CheckpointSaveError", "Checkpoint", "FORMAT_VERSION", "read_checkpoint", "read_manifest",
    "write_checkpoint",
    "list_checkpoints", "prune_checkpoints", "save_trainer", "restore_trainer", "trainer_from_checkpoint",
    "trainer_state",
    "check_weights_fit", "split_arrays", "join_arrays",
]
