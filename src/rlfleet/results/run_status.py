"""A run folder's status: `run_status.json`, written when a run starts and when it ends.

    {"status": "running", "pid": 4242, "pid_started": 1796428110.5, "host": "vm",
     "started": "2026-12-04T23:48:30", "ended": null, "reason": null}

==========  ==================================================================================
status      meaning
==========  ==================================================================================
running     the process that trains it is alive (checked by pid and its start time, on the
            same host; a run on another host is taken at its word)
finished    a stop criterion was met (`rlfleet train`), or Tune's last result says `done`
stopped     stopped before its criteria: Ctrl-C / SIGTERM, or `Trainer.stop()` from Python
failed      an error ended it, or its process is gone without having said how it ended
            (SIGKILL, out of memory, a preempted machine): `reason` says which
==========  ==================================================================================

`UnifiedLogger` writes "running" when it opens a run folder of its own and "stopped" when it
closes one still running; `rlfleet train` then writes how its run ended. A folder without the
file (a Tune trial) is "finished" when its last result is `done`, else "stopped". The file is
replaced atomically (written aside, then renamed), so a reader never sees half of it.
"""
from __future__ import annotations

import datetime
import json
import os
import socket
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

STATUS_FILE = "run_status.json"
STATUSES = ("running", "finished", "stopped", "failed")


@dataclass(frozen=True)
class RunStatus:
    """A run's status as read back (see the module's table).

    Attributes:
        status: one of `STATUSES`.
        reason: why it ended that way, when known (an error's message, "killed", ...).
        pid: the process training it, while it runs.
    """

    status: str
    reason: Optional[str] = None
    pid: Optional[int] = None  # the training process, while "running"


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def _process_started(pid: int) -> Optional[float]:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def _write(run_dir: str, record: Mapping[str, Any]) -> None:
    path = os.path.join(run_dir, STATUS_FILE)
    aside = f"{path}.{os.getpid()}.tmp"
    with open(aside, "w", encoding="utf-8") as f:
        json.dump(dict(record), f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(aside, path)


def _read(run_dir: str) -> Optional[Dict[str, Any]]:
    try:
        with open(os.path.join(run_dir, STATUS_FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def mark_running(run_dir: str) -> None:
    """Records that this process trains the run in `run_dir` (from now on)."""
    pid = os.getpid()
    _write(run_dir, {"status": "running", "pid": pid, "pid_started": _process_started(pid),
                     "host": socket.gethostname(), "started": _now(), "ended": None, "reason": None})


def mark_ended(run_dir: str, status: str, reason: Optional[str] = None, *, only_if_running: bool = False) -> None:
    """Records how the run in `run_dir` ended.

    Args:
        run_dir: the run folder.
        status: "finished", "stopped" or "failed".
        reason: a short reason shown beside the status (an error's message, the signal).
        only_if_running: leave a status already ended by someone else (the CLI) as it is.

    Raises:
        ValueError: `status` is not an end status.
    """
    if status not in STATUSES[1:]:
        raise ValueError(f"run status {status!r}: give one of {', '.join(STATUSES[1:])}")
    record = _read(run_dir) or {}
    if only_if_running and record.get("status") not in (None, "running"):
        return
    record.update(status=status, ended=_now(), reason=reason)
    _write(run_dir, record)


def read_status(run_dir: str, last_result: Optional[Mapping[str, Any]] = None) -> RunStatus:
    """The status of the run in `run_dir` (see the module's table).

    Args:
        run_dir: the run folder.
        last_result: its last result, for folders without a status file (Tune trials).
    """
    record = _read(run_dir)
    if record is None or record.get("status") not in STATUSES:
        done = bool(last_result and last_result.get("done"))
        return RunStatus("finished" if done else "stopped")
    status = record["status"]
    if status != "running" or record.get("host") != socket.gethostname():
        return RunStatus(status, record.get("reason"))
    pid, started = record.get("pid"), record.get("pid_started")
    alive = isinstance(pid, int) and _process_started(pid) is not None
    if alive and isinstance(started, (int, float)):
        # A pid reused by another process since: its start time differs.
        alive = abs(_process_started(pid) - started) < 1.0
    if alive:
        return RunStatus("running", pid=pid)
    return RunStatus("failed", "its process is gone without closing the run (killed?)")


__all__ = ["RunStatus", "STATUSES", "STATUS_FILE", "mark_ended", "mark_running", "read_status"]
