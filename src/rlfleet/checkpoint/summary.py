"""What a checkpoint holds, read from its JSON alone: `rlfleet checkpoint inspect PATH`.

The summary comes from manifest.json and state.json (checked against the manifest's
checksum), never from the safetensors files and never by importing what the checkpoint names:
the algorithm, its trainer and policy classes and its env stay text, so inspecting a checkpoint
from anyone runs none of its code. Each listed file's size is checked against the manifest
(its SHA-256 too with `verify`), so a damaged checkpoint shows which file is damaged.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional

from rlfleet.checkpoint.folder import FORMAT_VERSION, MANIFEST, list_checkpoints, read_manifest
from rlfleet.checkpoint.migrations import oldest_readable, pending
from rlfleet.utils.safe_files import CheckpointError, parse_json, read_verified, safe_join

_COUNTERS = (("num_env_steps_sampled", "env steps sampled"), ("num_env_steps_trained", "trained"),
             ("num_agent_steps_sampled", "agent steps sampled"), ("num_agent_steps_trained", "trained"))


def _file_status(path: str, rel: str, record: Any, verify: bool) -> str:
    """"ok", or what is wrong with the listed file `rel`."""
    if not isinstance(record, dict):
        return "malformed manifest entry"
    try:
        full = safe_join(path, rel, MANIFEST)
    except CheckpointError:
        return "outside the checkpoint folder"
    if not os.path.isfile(full):
        return "missing"
    if os.path.getsize(full) != record.get("size"):
        return f"damaged: {os.path.getsize(full)} bytes, the manifest records {record.get('size')}"
    if verify:
        try:
            read_verified(path, rel, record, MANIFEST)
        except CheckpointError:
            return "damaged: its SHA-256 differs from the manifest's"
    return "ok"


def _env_text(env: Any) -> Optional[str]:
    if isinstance(env, dict) and isinstance(env.get("__callable__"), str):
        return env["__callable__"]  # an env class, recorded by name (not imported here)
    return None if env is None else str(env)


def _is_buffer(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("size"), int) and isinstance(entry.get("capacity"), int)


def _replay_buffers(path: str, manifest: Dict[str, Any], files: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """{name: {type, size, capacity}} of the replay buffers state.json describes: the trainer's
    state entries (and their entries: one buffer per policy) that record a size and capacity."""
    index = manifest.get("state_index")
    if not isinstance(index, str) or files.get(index) != "ok":
        return {}
    try:
        state = parse_json(read_verified(path, index, manifest["files"][index], MANIFEST), index)
    except CheckpointError:
        return {}
    found: Dict[str, Any] = {}
    for key, entry in (state.items() if isinstance(state, dict) else ()):
        if key == "worker" or not isinstance(entry, dict):
            continue
        found.update({key: entry} if _is_buffer(entry) else
                     {f"{key}/{sub}": e for sub, e in entry.items() if _is_buffer(e)})
    return {name: {k: b.get(k) for k in ("type", "size", "capacity")} for name, b in sorted(found.items())}


def describe_checkpoint(path: str, verify: bool = False) -> Dict[str, Any]:
    """The summary of the checkpoint folder `path` (see the module docstring), as JSON-able dict.

    Args:
        path: a checkpoint folder (or its manifest.json).
        verify: also check every file's SHA-256 (reads every file; otherwise sizes only).

    Raises:
        CheckpointError: `path` is not an rlfleet checkpoint, or one of a newer format than
            this rlfleet reads.
    """
    path = os.fspath(path)
    if os.path.basename(path) == MANIFEST:
        path = os.path.dirname(path)
    try:
        manifest = read_manifest(path)
    except CheckpointError as exc:
        inside = [os.path.basename(p) for p in list_checkpoints(path)]
        if inside:  # a run folder
            raise CheckpointError(f"{exc}; it holds the checkpoints {inside}: inspect one of them, e.g. "
                                  f"{os.path.join(path, inside[-1])!r}") from None
        raise
    version = manifest["format_version"]
    try:
        migrations = [m.description for m in pending(version, FORMAT_VERSION)]
        readable = None
    except CheckpointError as exc:
        migrations, readable = [], str(exc)
    files = {str(rel): _file_status(path, str(rel), record, verify) for rel, record in sorted(manifest["files"].items())}
    sizes = {rel: (record.get("size") if isinstance(record, dict) else None) for rel, record in manifest["files"].items()}
    sizes[MANIFEST] = os.path.getsize(os.path.join(path, MANIFEST))
    buffers = _replay_buffers(path, manifest, files)
    policies = {}
    recorded = manifest.get("policies") if isinstance(manifest.get("policies"), dict) else {}
    for pid, entry in sorted(recorded.items()):
        entry = entry if isinstance(entry, dict) else {}
        weights = entry.get("weights") if isinstance(entry.get("weights"), dict) else {}
        policies[pid] = {
            "policy_class": entry.get("policy_class"),
            "observation_space": entry.get("observation_space"),
            "action_space": entry.get("action_space"),
            "tensors": len(weights),
            "parameters": sum(math.prod(shape) for shape in weights.values()
                              if isinstance(shape, list) and all(isinstance(d, int) for d in shape)),
        }
    user_config = manifest.get("user_config") if isinstance(manifest.get("user_config"), dict) else {}
    return {
        "path": os.path.abspath(path),
        "format_version": version,
        "current_format_version": FORMAT_VERSION,
        "migrations": migrations,
        "unreadable": readable,
        "upgraded_from": manifest.get("upgraded_from"),
        "rlfleet_version": manifest.get("rlfleet_version"),
        "versions": manifest.get("versions"),
        "created": manifest.get("created"),
        "algorithm": manifest["algorithm"],
        "trainer_class": manifest.get("trainer_class"),
        "env": _env_text(user_config.get("env")),
        "iteration": manifest["iteration"],
        "counters": manifest.get("counters") if isinstance(manifest.get("counters"), dict) else {},
        "episodes_total": manifest.get("episodes_total"),
        "time_total_s": manifest.get("time_total_s"),
        "policies": policies,
        "replay_buffers": buffers,
        "files": {rel: {"size": sizes.get(rel), "status": files.get(rel, "ok")} for rel in sorted(sizes)},
        "total_bytes": sum(s for s in sizes.values() if isinstance(s, int)),
        "verified": bool(verify),
    }


def _size(n: Any) -> str:
    if not isinstance(n, int):
        return "?"
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return "?"  # pragma: no cover


def _format_line(s: Dict[str, Any]) -> str:
    version, current = s["format_version"], s["current_format_version"]
    if version == current:
        text = f"version {version} (current)"
    elif s["unreadable"]:
        text = (f"version {version}: this rlfleet cannot read it (it reads versions "
                f"{oldest_readable(current)} to {current})")
    else:
        n = len(s["migrations"])
        text = (f"version {version}, older than this rlfleet's {current}: it loads through {n} migration"
                f"{'s' if n != 1 else ''} ({'; '.join(s['migrations'])}); `rlfleet checkpoint upgrade` "
                "rewrites it in the current format")
    if isinstance(s["upgraded_from"], dict):
        text += f"; upgraded from version {s['upgraded_from'].get('format_version')}"
    return text


def format_summary(s: Dict[str, Any]) -> str:
    """`describe_checkpoint`'s summary as text."""
    versions = s["versions"] if isinstance(s["versions"], dict) else {}
    others = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if k != "rlfleet")
    counters = s["counters"]
    progress = [f"iteration {s['iteration']}"]
    progress += [f"{counters[key]:,} {label}" for key, label in _COUNTERS if isinstance(counters.get(key), int)]
    if isinstance(s["episodes_total"], int):
        progress.append(f"{s['episodes_total']:,} episode{'s' if s['episodes_total'] != 1 else ''}")
    if isinstance(s["time_total_s"], (int, float)):
        progress.append(f"{s['time_total_s']:.1f} s")
    lines: List[str] = [
        f"Checkpoint {s['path']}",
        f"  format       {_format_line(s)}",
        f"  written by   rlfleet {s['rlfleet_version'] or '?'}, {s['created'] or '?'}" + (f" ({others})" if others else ""),
        f"  algorithm    {s['algorithm']}" + (f" ({s['trainer_class']})" if s["trainer_class"] else ""),
        f"  env          {s['env'] or 'not recorded'}",
        f"  progress     {', '.join(progress)}",
        f"Policies ({len(s['policies'])})",
    ]
    for pid, p in s["policies"].items():
        lines.append(f"  {pid}: {p['policy_class'] or '?'}")
        lines.append(f"    observation space  {p['observation_space'] or 'not recorded'}")
        lines.append(f"    action space       {p['action_space'] or 'not recorded'}")
        lines.append(f"    weights            {p['parameters']:,} parameters in {p['tensors']} tensors")
    if s["replay_buffers"]:
        lines.append(f"Replay buffers ({len(s['replay_buffers'])})")
        for name, b in s["replay_buffers"].items():
            lines.append(f"  {name}: {b['size']:,} of {b['capacity']:,} rows ({b.get('type') or '?'})")
    checked = "sizes and SHA-256 checked" if s["verified"] else "sizes checked; --verify checks SHA-256 too"
    lines.append(f"Files ({len(s['files'])}, {_size(s['total_bytes'])}; {checked})")
    width = max(len(rel) for rel in s["files"])
    for rel, f in s["files"].items():
        status = "" if f["status"] == "ok" else f"  <- {f['status'].upper()}"
        lines.append(f"  {rel:<{width}}  {_size(f['size']):>10}{status}")
    if s["unreadable"]:
        lines.append(s["unreadable"])
    return "\n".join(lines) + "\n"


def damaged_files(s: Dict[str, Any]) -> List[str]:
    """The files of a summary that are missing or damaged."""
    return [f"{rel} ({f['status']})" for rel, f in s["files"].items() if f["status"] != "ok"]
