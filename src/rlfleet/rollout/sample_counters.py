"""Per-worker sample accounting: what each rollout worker handed out, what the driver got.

A worker counts the env steps of every batch its `sample()` returns (`SampleCounter`, with
its process id, so a chaos run can name the process to kill); the driver counts, per worker
index, the env steps it received (`ReceivedLedger`). For a worker still alive, handed minus
received is the steps in flight or lost; for a worker that died, its last report (read
through `worker.apply`/a heartbeat before the kill) bounds what it handed out, so "exact"
means exact up to the batches handed out after the last report was read.
"""

import os
from typing import Any, Dict, Mapping


class SampleCounter:
    """Env steps one worker handed out through `sample()`, and the process it runs in."""

    def __init__(self, worker_index: int) -> None:
        self.worker_index = worker_index
        self.pid = os.getpid()
        self.handed_env_steps = 0
        self.handed_batches = 0

    def record(self, batch: Any) -> None:
        self.handed_env_steps += int(batch.env_steps())
        self.handed_batches += 1

    def report(self) -> Dict[str, int]:
        return {"worker_index": self.worker_index, "pid": self.pid,
                "handed_env_steps": self.handed_env_steps, "handed_batches": self.handed_batches}


class ReceivedLedger:
    """The driver's side: env steps received per worker index."""

    def __init__(self) -> None:
        self.received: Dict[int, int] = {}

    def record(self, worker_index: int, batch: Any) -> None:
        self.received[worker_index] = self.received.get(worker_index, 0) + int(batch.env_steps())

    def lost(self, reports: Mapping[int, Mapping[str, int]]) -> Dict[int, int]:
        """Steps each worker reported handing out that the driver never received."""
        lost = {}
        for index, report in reports.items():
            missing = int(report["handed_env_steps"]) - self.received.get(index, 0)
            if missing < 0:
                raise ValueError(f"worker {index}: the driver received {self.received.get(index, 0)} env steps, "
                                 f"more than the {report['handed_env_steps']} the worker reported; "
                                 "read the worker's report after the driver's ledger, not before")
            lost[index] = missing
        return lost
