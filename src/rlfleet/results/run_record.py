"""`run.json`: what `rlfleet train` ran in a run folder.

`rlfleet train` writes it (atomically: a temp file, then a rename) when a run starts or resumes,
so that `rlfleet train --resume RUN_DIR` can continue the run with its stop criteria and
checkpoint settings. How the run stands (running, finished, stopped, failed) is kept apart, in
`run_status.json` (`rlfleet.results.run_status`), which `rlfleet runs` and `--resume` both read:

    {"format": "rlfleet-run", "format_version": 1,
     "experiment": "cartpole-ppo", "run": "PPO", "env": "CartPole-v1",
     "config_file": "/abs/path/cartpole-ppo.yaml" or null, "config_digest": "<sha256>",
     "stop": {"episode_reward_mean": 150}, "checkpoint_freq": 0, "checkpoint_every_s": 600,
     "checkpoint_at_end": false, "keep_checkpoints_num": null,
     "started": "<UTC ISO time>", "updated": "..."}

`config_digest` is the SHA-256 of the experiment's algorithm, env and config as JSON: a
resume from the same YAML file notices when the file's config has changed since.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional

from rlfleet.results.result_values import to_jsonable

RUN_FILE = "run.json"
FORMAT = "rlfleet-run"
FORMAT_VERSION = 1
# Entries of run.json format 1 as first written (how the run stood): now in run_status.json.
_STATUS_ENTRIES = ("status", "pid", "host", "iteration", "message")


def config_digest(run: str, env: Optional[str], config: Mapping[str, Any]) -> str:
    """The SHA-256 of an experiment's algorithm, env and config (classes by name)."""
    text = json.dumps(to_jsonable({"run": run, "env": env, "config": config}), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def start_record(logdir: str, experiment: Mapping[str, Any]) -> Dict[str, Any]:
    """Writes `logdir`/run.json for a run starting (or resuming) now in this process.

    Args:
        logdir: the run folder.
        experiment: the experiment's entries (`experiment`, `run`, `env`, `config_file`,
            `config_digest`, `stop` and the checkpoint settings); a resumed run passes its
            record, whose `started` is kept.

    Returns:
        The record written.
    """
    record = {k: v for k, v in experiment.items() if k not in _STATUS_ENTRIES}
    record.update(format=FORMAT, format_version=FORMAT_VERSION, updated=_now())
    record.setdefault("started", record["updated"])
    _write(logdir, record)
    return record


def read_record(logdir: str) -> Optional[Dict[str, Any]]:
    """`logdir`'s run.json, or None when it has none.

    Raises:
        ValueError: the file exists but is not a run record (named, with what is wrong).
    """
    path = os.path.join(logdir, RUN_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path!r} is not valid JSON ({exc}); it is written by `rlfleet train`") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"{path!r} is not an rlfleet run record (no \"format\": {FORMAT!r})")
    for key, kind in (("run", str), ("stop", dict)):
        if not isinstance(record.get(key), kind):
            raise ValueError(f"{path!r} lacks a valid {key!r} entry")
    return record


def _write(logdir: str, record: Mapping[str, Any]) -> None:
    # Lazily: utils.safe_files imports NumPy; this module is imported at CLI start-up.
    from rlfleet.utils.safe_files import write_file_atomic

    data = (json.dumps(to_jsonable(record), indent=2, sort_keys=True) + "\n").encode("utf-8")
    write_file_atomic(os.path.join(logdir, RUN_FILE), data)
