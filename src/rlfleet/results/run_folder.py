"""A run's results folder: where it goes (`default_results_dir`), its unique name
(`make_logdir`), and the machine-usage numbers of `log_sys_usage` (`sys_usage`).

Cheap to import (the CLI imports it at start-up): no NumPy, no torch at module level.
"""
from __future__ import annotations

import datetime
import os
import re
import secrets
from typing import Dict, Optional

RESULTS_DIR_ENV = "RLFLEET_RESULTS_DIR"

_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
# Keep folder names well under common 255-byte file-name limits.
_MAX_NAME_PART = 80


def default_results_dir() -> str:
    """Where run folders go when no directory is given.

    Returns:
        ``$RLFLEET_RESULTS_DIR`` if set (``~`` expanded), else ``~/rlfleet_results``.
    """
    env_dir = os.environ.get(RESULTS_DIR_ENV)
    if env_dir:
        return os.path.expanduser(env_dir)
    return os.path.join(os.path.expanduser("~"), "rlfleet_results")


def sys_usage() -> Dict[str, float]:
    """This machine's CPU and memory use in percent, and each visible GPU's memory (and
    load, with NVML) once this process uses CUDA, for a result's `perf` (`log_sys_usage`).

    `cpu_util_percent` is the CPU use since the previous call (0.0 on the first).
    """
    import psutil

    usage = {"cpu_util_percent": float(psutil.cpu_percent()),
             "ram_util_percent": float(psutil.virtual_memory().percent)}
    usage.update(_gpu_usage())
    return usage


def _gpu_usage() -> Dict[str, float]:
    import sys

    torch = sys.modules.get("torch")  # never import torch just for this
    if torch is None:
        return {}
    try:
        # Only once this process uses CUDA: a context made just for these numbers costs
        # hundreds of MB of GPU memory.
        if not torch.cuda.is_initialized():
            return {}
        out: Dict[str, float] = {}
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            out[f"vram_util_percent{i}"] = 100.0 * (total - free) / total
            try:  # needs NVML (the nvidia-ml-py package)
                out[f"gpu_util_percent{i}"] = float(torch.cuda.utilization(i))
            except Exception:
                pass
        return out
    except Exception:  # a broken driver must not break training
        return {}


def _sanitize(name: str) -> str:
    """Makes one folder-name part safe on every filesystem ("ALE/Pong-v5" -> "ALE_Pong-v5")."""
    cleaned = _UNSAFE_PATH_CHARS.sub("_", name).strip("._")
    return cleaned[:_MAX_NAME_PART] or "unnamed"


def make_logdir(algo: str, env_id: Optional[str], results_dir: Optional[str] = None) -> str:
    """Creates a new, unique run folder.

    The name is ``<Algo>_<env>_<YYYY-MM-DD_HH-MM-SS>_<random>`` (the env part is left out
    when ``env_id`` is None). The random suffix makes two runs started in the same second,
    even from different processes, land in different folders.

    Args:
        algo: algorithm name, e.g. "PPO".
        env_id: environment id, e.g. "CartPole-v1" or "ALE/Pong-v5"; None for no env part.
        results_dir: parent folder; defaults to :func:`default_results_dir`. Created if
            missing.

    Returns:
        The absolute path of the new (empty) folder.
    """
    parent = os.path.abspath(os.path.expanduser(results_dir or default_results_dir()))
    os.makedirs(parent, exist_ok=True)
    parts = [_sanitize(str(algo))]
    if env_id is not None:
        parts.append(_sanitize(str(env_id)))
    parts.append(datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    prefix = "_".join(parts)
    # os.makedirs(exist_ok=False) is atomic: on the (tiny) chance of a suffix collision we
    # simply draw again instead of sharing a folder with another run.
    for _ in range(100):
        path = os.path.join(parent, f"{prefix}_{secrets.token_hex(3)}")
        try:
            os.makedirs(path)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"Could not create a unique run folder under {parent!r}")
