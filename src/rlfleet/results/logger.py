"""Per-run result logging: the results folder, ``params.json``, ``result.json``,
``progress.csv`` and TensorBoard event files (tensorboardX), and `log_sys_usage`'s numbers.

These are the files users open after a run, so they are written line by line and flushed
after every result: a crash or Ctrl-C never loses a finished iteration.

The results folder is made by `rlfleet.results.run_folder`, values are made JSON-safe and flat by
`rlfleet.results.result_values` (both re-exported here). This module must stay cheap to import (the
CLI imports it at start-up): it imports neither NumPy nor torch at module level.
"""
from __future__ import annotations

import csv
import json
import math
import logging
import os
import secrets
import socket
import struct
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlfleet.results.result_values import (  # noqa: F401 (re-exported)
    EXCLUDED_FROM_CSV,
    excluded_from_csv,
    flatten_dict,
    is_number,
    to_jsonable,
)
from rlfleet.results.run_status import mark_ended, mark_running
from rlfleet.results.run_folder import RESULTS_DIR_ENV, default_results_dir, make_logdir, sys_usage  # noqa: F401 (re-exported)

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Loggers: one per file format; UnifiedLogger runs several over one results folder
# --------------------------------------------------------------------------------------
class Logger:
    """One kind of result log in a results folder (Ray Tune's `Logger` interface, as RLlib 1.x uses it).

    A `logger_config: {"type": MyLogger, **options}` logger is built as
    `MyLogger(options, logdir)` and gets every result; Tune's own `Logger` subclasses fit.

    Args:
        config: the logger's options (`logger_config` without `type`).
        logdir: the results folder (created if missing).
    """

    def __init__(self, config: Mapping[str, Any], logdir: str):
        self.config = config
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)

    def on_config(self, config: Mapping[str, Any], run_dir: str) -> None:
        """Gets the run's config and its run folder once, before the first result (a tracker
        logs the config as the run's parameters and the folder's checkpoints). No-op here."""

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Logs one result dict (as returned by `Trainer.train()`)."""
        raise NotImplementedError  # abstract: each logger writes its own format

    def flush(self) -> None:
        """Writes out anything buffered."""

    def close(self) -> None:
        """Releases the files; called once at the end of the run."""


class JsonLogger(Logger):
    """`result.json`: one JSON line per result, everything kept (flushed after each line)."""

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        self._file = open(os.path.join(logdir, "result.json"), "a", encoding="utf-8")

    def on_result(self, result: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(_jsonable_dict(result), sort_keys=True) + "\n")
        self._file.flush()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class CSVLogger(Logger):
    """`progress.csv`: one row per result, flattened with "/" (bulky keys left out).

    The header is fixed by the first result: keys that show up later (e.g. evaluation
    metrics) are dropped, missing ones left empty, so every row lines up. A folder that
    already holds a `progress.csv` (a resumed run) gets new rows under its old header.
    """

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        path = os.path.join(logdir, "progress.csv")
        self._header: Optional[List[str]] = self._existing_header(path)
        self._file = open(path, "a", encoding="utf-8", newline="")
        self._writer: Optional[csv.DictWriter] = None
        if self._header is not None:
            self._writer = self._new_writer(self._header)

    @staticmethod
    def _existing_header(path: str) -> Optional[List[str]]:
        try:
            with open(path, encoding="utf-8", newline="") as f:
                header = next(csv.reader(f), None)
        except (OSError, csv.Error):
            return None
        return header or None

    def _new_writer(self, header: List[str]) -> csv.DictWriter:
        return csv.DictWriter(self._file, fieldnames=header, restval="", extrasaction="ignore")

    def on_result(self, result: Mapping[str, Any]) -> None:
        flat = _flat_logged(result)
        if self._writer is None:
            self._header = list(flat)
            self._writer = self._new_writer(self._header)
            self._writer.writeheader()
        # Lists would otherwise be written with Python's repr; JSON reads back anywhere.
        self._writer.writerow({k: json.dumps(v) if isinstance(v, list) else ("" if v is None else v)
                               for k, v in flat.items()})
        self._file.flush()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class _EventFile:
    """A TensorBoard event file (TFRecord framing of `Event` protos), written synchronously.

    tensorboardX's `SummaryWriter` queues every scalar through a `multiprocessing.Queue` to a
    writer thread and fsyncs on each flush: about 10 ms per result, a quarter of a small PPO
    iteration. Here a result is one `Event` holding all its scalars, appended and flushed to
    the OS (visible to TensorBoard at once); fsync happens only on close.
    """

    def __init__(self, logdir: str):
        # Lazily: tensorboardX pulls protobuf in; the CLI imports this module at start-up.
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import masked_crc32c

        self._event_pb2, self._summary_pb2, self._crc = event_pb2, summary_pb2, masked_crc32c
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(3)}"
        self._file = open(os.path.join(logdir, name), "ab")
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self._file.flush()

    def _write(self, event: Any) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", self._crc(header)) + data + struct.pack("<I", self._crc(data)))

    def write_scalars(self, scalars: Mapping[str, float], step: Optional[int]) -> None:
        values = [self._summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in scalars.items()]
        event = self._event_pb2.Event(wall_time=time.time(), summary=self._summary_pb2.Summary(value=values))
        if step is not None:
            event.step = step
        self._write(event)
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def _open_event_file(logdir: str) -> Optional[_EventFile]:
    """An `_EventFile` in `logdir` (None if tensorboardX cannot load)."""
    try:
        return _EventFile(logdir)
    except ImportError as exc:  # tensorboardX missing, or a broken protobuf install
        logger.warning("TensorBoard logging disabled: tensorboardX cannot be imported (%s: %s); "
                       "pip install tensorboardX", type(exc).__name__, exc)
        return None


class TBXLogger(Logger):
    """TensorBoard event files (`events.out.tfevents.*`, tensorboardX's protobuf messages):
    every numeric result key as a scalar at step `timesteps_total` (or `training_iteration`)."""

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        self._events = _open_event_file(logdir)

    def on_result(self, result: Mapping[str, Any]) -> None:
        if self._events is None:
            return
        step = result.get("timesteps_total")
        if not is_number(step):
            step = result.get("training_iteration")
        step = int(step) if is_number(step) else None
        # NaN (e.g. the mean reward before any episode ended) is left out: TensorBoard would
        # draw nothing for it.
        scalars = {key: float(value) for key, value in _flat_logged(result).items()
                   if is_number(value) and math.isfinite(value)}
        self._events.write_scalars(scalars, step)

    def close(self) -> None:
        if self._events is not None:
            self._events.close()


DEFAULT_LOGGERS = (JsonLogger, CSVLogger, TBXLogger)
_BUILT_IN = {cls.__name__: cls for cls in DEFAULT_LOGGERS}
# Experiment trackers, each an optional extra: imported only when named (by these names too).
TRACKER_LOGGERS = {"MLflowLogger": "rlfleet.results.mlflow_tracker.MLflowLogger",
                   "WandbLogger": "rlfleet.results.wandb_tracker.WandbLogger"}


def _jsonable_dict(result: Mapping[str, Any]) -> Dict[str, Any]:
    safe = to_jsonable(result)
    return safe if isinstance(safe, dict) else {"value": safe}


def _flat_logged(result: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in flatten_dict(_jsonable_dict(result)).items() if not excluded_from_csv(k)}


def _resolve_logger_class(spec: Any) -> type:
    if isinstance(spec, str):
        if spec in _BUILT_IN:
            return _BUILT_IN[spec]
        spec = TRACKER_LOGGERS.get(spec, spec)
        import importlib

        module, _, name = spec.replace(":", ".").rpartition(".")
        try:
            spec = getattr(importlib.import_module(module), name) if module else None
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"'logger_config.type': cannot import {spec!r} ({exc}); give a logger class, its "
                             f"path 'package.module.Class', or one of {sorted(_BUILT_IN) + sorted(TRACKER_LOGGERS)}"
                             ) from None
    if not isinstance(spec, type):
        raise ValueError(f"'logger_config.type': {spec!r} is not a class; give a logger class (with "
                         f"on_result(result) and close()), its path 'package.module.Class', or one of "
                         f"{sorted(_BUILT_IN)}")
    return spec


def logger_types(config: Mapping[str, Any]) -> List[type]:
    """The logger classes `config["logger_config"]["type"]` names (a class, a
    "package.module.Class" path, a built-in name such as "CSVLogger", or a list of those);
    empty when it names none.

    Raises:
        ValueError: naming `logger_config.type` when one cannot be imported or is not a class.
    """
    options = config.get("logger_config") or {}
    spec = options.get("type") if isinstance(options, Mapping) else None
    if spec is None:
        return []
    return [_resolve_logger_class(s) for s in (spec if isinstance(spec, (list, tuple)) else [spec])]


# --------------------------------------------------------------------------------------
# UnifiedLogger
# --------------------------------------------------------------------------------------
class UnifiedLogger:
    """Writes one run's results folder: params.json, then each result to several loggers.

    By default those are result.json (`JsonLogger`), progress.csv (`CSVLogger`) and
    TensorBoard events (`TBXLogger`). `config["logger_config"]` replaces them as
    RLlib 1.x does: `{"type": MyLogger or [A, B, ...], **options}` builds `cls(options, logdir)`
    for each (`options` without `type`; an option `logdir` moves them to another folder).

    Args:
        config: the run's config, written once to ``params.json`` (made JSON-safe with
            :func:`to_jsonable`).
        logdir: the run folder (created if missing). If it already holds a
            ``progress.csv`` (a run resumed into its old folder), new rows are appended
            under the existing header.
        loggers: logger classes to use instead of `logger_config.type` / the defaults.
        write_params: False to leave params.json out (Tune writes its own).
    """

    def __init__(self, config: Mapping[str, Any], logdir: str, loggers: Optional[Sequence[type]] = None,
                 write_params: bool = True):
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)
        self._owns_status = write_params  # under Tune, the trial's status is Tune's
        if write_params:
            with open(os.path.join(logdir, "params.json"), "w", encoding="utf-8") as f:
                json.dump(to_jsonable(config), f, indent=2, sort_keys=True)
                f.write("\n")
            mark_running(logdir)
        options = dict(config.get("logger_config") or {}) if isinstance(config, Mapping) else {}
        options.pop("type", None)
        where = os.path.expanduser(options.pop("logdir", None) or logdir)
        classes = list(loggers) if loggers is not None else (logger_types(config) or list(DEFAULT_LOGGERS))
        self.loggers: List[Any] = []
        try:
            for cls in classes:
                self.loggers.append(cls(options, where))
            for log in self.loggers:
                if isinstance(log, Logger):  # the hook is ours; Tune's loggers lack it
                    log.on_config(config, logdir)
        except BaseException as exc:
            self._close_all()
            if write_params:
                mark_ended(logdir, "failed", f"a logger could not start: {type(exc).__name__}: {exc}")
            raise
        self._closed = False

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Passes one result to every logger.

        Args:
            result: a result dict as returned by ``Trainer.train()``.
        """
        if self._closed:
            raise RuntimeError(f"UnifiedLogger for {self.logdir!r} is already closed")
        for log in self.loggers:
            log.on_result(result)

    def flush(self) -> None:
        """Flushes every logger (the built-in ones already flush after every result)."""
        if self._closed:
            return
        for log in self.loggers:
            if hasattr(log, "flush"):
                log.flush()

    def close(self) -> None:
        """Flushes and closes every logger; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._close_all()
        if self._owns_status:
            # The CLI records "finished" / "failed" itself; a run closed from Python stopped.
            mark_ended(self.logdir, "stopped", only_if_running=True)

    def _close_all(self) -> None:
        for log in self.loggers:
            try:
                log.close()
            except Exception:  # close everything even if one fails
                logger.exception("Error while closing logger %r in %s", log, self.logdir)

    def __enter__(self) -> "UnifiedLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
