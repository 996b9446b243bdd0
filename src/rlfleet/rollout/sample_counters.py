"""Per-worker sample accounting: what the rollout workers sampled, what the driver received,
trained on, still holds, or dropped. All counts are env steps.

A worker counts every batch its `sample()` returns (`SampleCounter`, with its process id,
so a chaos run can name the process to kill). A killed worker's counter dies with it, so a
counter can also append its running total to a file (`persist_to(folder)`): a `WorkerSet`
makes all its workers do so, replacements included, after `persist_sample_counts(folder)`
or when the `RLFLEET_SAMPLE_LEDGER_DIR` environment variable names a folder in the driver
(the chaos benchmark sets it for `rlfleet train`). `read_persisted(folder)` gives the last
total of every worker process, dead ones included.

The driver keeps a `ReceivedLedger` (`WorkerSet.received`). The quantities, for every data
path (synchronous sampling, IMPALA/APPO's learner queue, Ape-X's replay shards):

    sampled    env steps of the batches workers handed out (`SampleCounter`)
    received   of those, the steps that reached the driver (a worker killed before its
               answer arrives takes its batch with it: sampled, never received)
    trained    received steps a learner has learned on at least once; a step learned on
               again (num_sgd_iter, replay_proportion) counts once. Ape-X: the steps stored in
               a replay shard (the worker adds them before it answers); rows evicted from
               replay without ever being replayed count as stored, not lost
    queued     received, not trained yet: IMPALA/APPO's batches waiting for a train batch
               or on the learner queue (the trainer says how many: `samples_queued()`)
    dropped    received and thrown away, by reason: `restore` (batches queued when a
               checkpoint was written or restored do not survive the restore),
               `worker_failure` (a synchronous training step cut off by a dead worker),
               `health_probe` (the batch each worker samples in a health check)

    received = trained + queued + dropped      (the driver's books; `unaccounted` is 0)
    lost     = sampled - trained - queued      (= sampled - received + dropped)

The ledger travels in checkpoints (`get_state`/`set_state`), so a resumed run's counts go on
from the checkpoint's; `trained_at_restore` keeps what the checkpoint held.
"""

import os
from typing import Any, Dict, Mapping, Optional

# Read by `WorkerSet` in the driver: when set, its workers persist their counts in this folder.
LEDGER_DIR_ENV = "RLFLEET_SAMPLE_LEDGER_DIR"


class SampleCounter:
    """Env steps one worker handed out through `sample()`, and the process it runs in."""

    def __init__(self, worker_index: int) -> None:
        self.worker_index = worker_index
        self.pid = os.getpid()
        self.handed_env_steps = 0
        self.handed_batches = 0
        self._fd: Optional[int] = None

    def persist_to(self, folder: str) -> None:
        """From now on appends `worker_index handed_env_steps handed_batches` to
        `folder/<pid>.ledger` after every batch (one short `O_APPEND` write: a SIGKILL
        leaves every line whole). Calling it again in the same process does nothing."""
        if self._fd is None:
            os.makedirs(folder, exist_ok=True)
            self._fd = os.open(os.path.join(folder, f"{self.pid}.ledger"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                               0o644)
            self._write()

    def _write(self) -> None:
        os.write(self._fd, f"{self.worker_index} {self.handed_env_steps} {self.handed_batches}\n".encode())

    def record(self, batch: Any) -> None:
        self.handed_env_steps += int(batch.env_steps())
        self.handed_batches += 1
        if self._fd is not None:
            self._write()

    def report(self) -> Dict[str, int]:
        return {"worker_index": self.worker_index, "pid": self.pid,
                "handed_env_steps": self.handed_env_steps, "handed_batches": self.handed_batches}


def read_persisted(folder: str) -> Dict[int, Dict[str, int]]:
    """`{pid: report}` of every worker process that wrote to `folder` (`persist_to`): its
    last line, i.e. its final count when it is gone."""
    out: Dict[int, Dict[str, int]] = {}
    if not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".ledger"):
            continue
        with open(os.path.join(folder, name)) as f:
            lines = [line.split() for line in f.read().splitlines() if line.strip()]
        index, steps, batches = (int(x) for x in lines[-1])
        pid = int(name[: -len(".ledger")])
        out[pid] = {"worker_index": index, "pid": pid, "handed_env_steps": steps, "handed_batches": batches}
    return out


class ReceivedLedger:
    """The driver's side (see the module docstring for the quantities)."""

    def __init__(self) -> None:
        self.received: Dict[int, int] = {}
        self.trained = 0
        self.dropped: Dict[str, int] = {}
        self.trained_at_restore = 0

    def record(self, worker_index: int, batch: Any) -> None:
        """A batch of worker `worker_index` reached the driver."""
        self.record_steps(worker_index, int(batch.env_steps()))

    def record_steps(self, worker_index: int, env_steps: int) -> None:
        """`env_steps` of worker `worker_index` reached the driver (Ape-X: were stored)."""
        self.received[worker_index] = self.received.get(worker_index, 0) + int(env_steps)

    def record_trained(self, env_steps: int) -> None:
        """A learner learned on `env_steps` received steps for the first time."""
        self.trained += int(env_steps)

    def record_dropped(self, reason: str, env_steps: int) -> None:
        """`env_steps` received steps were thrown away, for `reason`."""
        if env_steps:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(env_steps)

    def total_received(self) -> int:
        return sum(self.received.values())

    def snapshot(self, queued: int) -> Dict[str, Any]:
        """The driver's books, with `queued` received steps not trained yet; `unaccounted`
        (received - trained - queued - dropped) is 0 unless a step went missing."""
        dropped = sum(self.dropped.values())
        received = self.total_received()
        return {"received": received, "trained": self.trained, "queued": int(queued), "dropped": dropped,
                "dropped_by_reason": dict(self.dropped), "trained_at_restore": self.trained_at_restore,
                "unaccounted": received - self.trained - int(queued) - dropped}

    def balance(self, reports: Mapping[Any, Mapping[str, int]], queued: int) -> Dict[str, Any]:
        """`snapshot(queued)` plus `sampled` (the sum of the workers' `reports`, e.g.
        `read_persisted`) and `lost` = sampled - trained - queued."""
        out = self.snapshot(queued)
        out["sampled"] = sum(int(r["handed_env_steps"]) for r in reports.values())
        out["lost"] = out["sampled"] - self.trained - int(queued)
        return out

    def get_state(self, queued: int) -> Dict[str, Any]:
        return {"received": {str(k): v for k, v in self.received.items()}, "trained": self.trained,
                "dropped": dict(self.dropped), "queued": int(queued)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """The books of a checkpoint; the steps it had queued are dropped (`restore`): the
        queue itself is not in checkpoints."""
        self.received = {int(k): int(v) for k, v in state.get("received", {}).items()}
        self.trained = self.trained_at_restore = int(state.get("trained", 0))
        self.dropped = {k: int(v) for k, v in state.get("dropped", {}).items()}
        self.record_dropped("restore", int(state.get("queued", 0)))

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
