"""Relative paths in an experiment file: found from the current folder, else from the file's.

`rlfleet train -f tuned_examples/bc/cartpole-bc.yaml` names its data as
`tuned_examples/bc/data/cartpole-expert.json`, relative to the checkout's root; run from
another folder, that path is looked up beside the YAML file (and in the folders above it, so
that such root-relative paths resolve too). Only values that read files are resolved (`input`:
a path, a glob, a list of them or a mixture `{path: probability}`); names that are not paths
(`sampler`, a registered input, `minari:<id>`) are left alone.
"""
from __future__ import annotations

import glob
import os
from typing import Any, Dict, List, Optional

from rlfleet.cli.common import UsageError

# Values of `input` that name no file.
_NOT_PATHS = ("sampler",)


def _looks_like_path(value: str) -> bool:
    if value in _NOT_PATHS or "://" in value or value.startswith("minari:"):
        return False
    return "/" in value or os.sep in value or value.endswith((".json", ".jsonl", ".zip"))


def _exists(path: str) -> bool:
    return bool(glob.glob(path)) if glob.has_magic(path) else os.path.exists(path)


def _candidate_folders(file_folder: str) -> List[str]:
    folders, folder = [], file_folder
    while True:
        folders.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return folders
        folder = parent


def resolve_path(value: str, file_path: str, where: str) -> str:
    """`value` as is when it exists from the current folder, else the first of the experiment
    file's folder and the folders above it that holds it.

    Raises:
        UsageError: found in none of them, naming the current folder and the file's.
    """
    if os.path.isabs(value) or _exists(value):
        return value
    file_folder = os.path.dirname(os.path.abspath(file_path))
    for folder in _candidate_folders(file_folder):
        candidate = os.path.join(folder, value)
        if _exists(candidate):
            return candidate
    raise UsageError(f"{where}: {value!r} exists neither in the current folder ({os.getcwd()}) nor beside the "
                     f"experiment file ({file_folder}) or above it; give a path that exists from one of them")


def resolve_file_paths(config: Dict[str, Any], file_path: Optional[str], where: str) -> Dict[str, Any]:
    """`config` (from an experiment file) with its relative input paths resolved (a new dict).

    Args:
        config: the experiment's `config` as the file holds it.
        file_path: the experiment file; None (the command line) leaves every path as it is.
        where: the experiment, for errors.
    """
    value = config.get("input")
    if file_path is None or value is None:
        return config
    key = f"{where}: config key 'input'"
    if isinstance(value, str) and _looks_like_path(value):
        value = resolve_path(value, file_path, key)
    elif isinstance(value, list):
        value = [resolve_path(v, file_path, key) if isinstance(v, str) and _looks_like_path(v) else v for v in value]
    elif isinstance(value, dict):
        value = {resolve_path(k, file_path, key) if isinstance(k, str) and _looks_like_path(k) else k: p
                 for k, p in value.items()}
    return dict(config, input=value)
