"""A policy's weights alone, as safetensors: `export_policy_weights` writes
`<prefix>.safetensors` + `<prefix>.json` (format, shapes, spaces, model config, checksum);
`import_policy_weights` loads them back, checking the checksum and the shapes, and never
runs code: the policy class and model config the JSON names are there for people and serving
code to read; nothing here imports a name recorded in it.
"""
from __future__ import annotations

import os
from typing import Any, Dict

import numpy as np

from rlfleet.utils.json_codec import encode, encode_space, qualified_name
from rlfleet.utils.safe_files import (
    CheckpointError,
    check_weights_fit,
    json_bytes,
    parse_safetensors,
    read_small_json,
    read_verified,
    safetensors_bytes,
    write_file_atomic,
)
from rlfleet.utils.versions import software_versions

WEIGHTS_FORMAT = "rlfleet-policy-weights"
FORMAT_VERSION = 1


def space_record(space) -> Any:
    """A space as JSON data (its repr where the codec has no encoding for it)."""
    try:
        return encode_space(space)
    except ValueError:
        return repr(space)


def export_policy_weights(policy, export_dir: str, filename_prefix: str = "model") -> str:
    """Writes `export_dir/<prefix>.safetensors` (the model's weights) and `<prefix>.json`
    (format, shapes, spaces, model config, checksum); returns the JSON file's path."""
    os.makedirs(export_dir, exist_ok=True)
    weights = policy.get_weights()
    weights_file = f"{filename_prefix}.safetensors"
    record = write_file_atomic(os.path.join(export_dir, weights_file), safetensors_bytes(weights))
    versions = software_versions()
    meta = {
        "format": WEIGHTS_FORMAT,
        "format_version": FORMAT_VERSION,
        "rlfleet_version": versions["rlfleet"],
        "versions": versions,
        "policy_class": qualified_name(type(policy)),
        "files": {weights_file: record},
        "weights": weights_file,
        "shapes": {k: list(np.shape(v)) for k, v in weights.items()},
        "observation_space": space_record(policy.observation_space),
        "action_space": space_record(policy.action_space),
        "model_config": encode(policy.config.get("model")),
    }
    path = os.path.join(export_dir, f"{filename_prefix}.json")
    write_file_atomic(path, json_bytes(meta))
    return path


def read_policy_weights(path: str) -> Dict[str, np.ndarray]:
    """The weights exported by `export_policy_weights`: `path` is the export folder (with
    `model.json`), the `.json` file, or the `.safetensors` file (checked against the JSON
    beside it when there is one)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "model.json")
    if path.endswith(".safetensors"):
        sidecar = path[: -len(".safetensors")] + ".json"
        if not os.path.isfile(sidecar):
            if not os.path.isfile(path):
                raise CheckpointError(f"import_model: no weights file at {path!r}")
            with open(path, "rb") as f:
                return parse_safetensors(f.read(), path)
        path = sidecar
    if not path.endswith(".json"):
        raise CheckpointError(f"import_model: {path!r} is neither an export folder, a .json nor a .safetensors "
                              "file (rlfleet imports only its own exported weights; nothing is unpickled)")
    meta = read_small_json(path, "import_model")
    if not isinstance(meta, dict) or meta.get("format") != WEIGHTS_FORMAT:
        raise CheckpointError(f"import_model: {path!r} is not an rlfleet weights file (format "
                              f"{meta.get('format') if isinstance(meta, dict) else None!r}, expected {WEIGHTS_FORMAT!r})")
    if not isinstance(meta.get("format_version"), int) or meta["format_version"] > FORMAT_VERSION:
        raise CheckpointError(f"import_model: {path!r} has format version {meta.get('format_version')!r}; this "
                              f"rlfleet reads up to {FORMAT_VERSION}: upgrade rlfleet")
    rel, files = meta.get("weights"), meta.get("files")
    if not isinstance(rel, str) or not rel.endswith(".safetensors") or not isinstance(files, dict) \
            or not isinstance(files.get(rel), dict):
        raise CheckpointError(f"import_model: {path!r} names no checksummed .safetensors weights file")
    root = os.path.dirname(os.path.abspath(path))
    data = read_verified(root, rel, files[rel], path)
    return parse_safetensors(data, os.path.join(root, rel))


def import_policy_weights(policy, path: str) -> None:
    """Loads weights written by `export_policy_weights` into `policy` (shapes checked first)."""
    weights = read_policy_weights(path)
    check_weights_fit(weights, policy.get_weights(), f"weights {path!r}")
    policy.set_weights(weights)


__all__ = ["WEIGHTS_FORMAT", "export_policy_weights", "import_policy_weights", "read_policy_weights", "space_record"]
