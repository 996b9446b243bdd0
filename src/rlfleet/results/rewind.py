"""Rewinding a run folder's logs to an iteration, for a run resumed from a checkpoint.

A run killed after checkpoint K may have logged iterations K+1, K+2, ... (and half of the
next line) before it died; the resumed run redoes them from K. So, before it logs anything,
each built-in log is cut after its last record of iteration <= K:

| file                      | a record                      | its iteration                   |
| ------------------------- | ----------------------------- | ------------------------------- |
| `result.json`             | one JSON line                 | its `training_iteration`        |
| `progress.csv`            | one CSV row under the header  | its `training_iteration` column |
| `events.out.tfevents.*`   | one TFRecord-framed `Event`   | its `training_iteration` scalar |

Records follow each other in iteration order (the loggers append, and every resume rewinds
first), so the cut is at the first record past K, or at a record that is incomplete or
unreadable (the tail a kill mid-write leaves). A file is cut in place (`os.truncate`), so a
logger that already holds it open for appending (`UnifiedLogger`) goes on at the new end.
Loggers of other types (`logger_config.type`) keep their own files and are not rewound.

Cheap to import (the CLI imports it): no NumPy, no torch; protobuf only when an event
file is read.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

ITERATION_KEY = "training_iteration"
RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.csv"
EVENT_FILES = "events.out.tfevents.*"


@dataclass
class Rewound:
    """What `rewind_logs` cut: {file name: records dropped} (files left whole are absent)."""

    dropped: Dict[str, int] = field(default_factory=dict)

    @property
    def iterations_dropped(self) -> int:
        """The records dropped from result.json: the iterations that will be logged again."""
        return self.dropped.get(RESULT_FILE, 0)


def rewind_logs(logdir: str, iteration: int) -> Rewound:
    """Cuts `logdir`'s result.json, progress.csv and TensorBoard event files after their last
    record of `training_iteration` <= `iteration` (see the module docstring).

    Args:
        logdir: the run folder.
        iteration: the iteration the run resumes after (its checkpoint's).

    Returns:
        The records dropped per file.
    """
    report = Rewound()
    for name, cut in ((RESULT_FILE, _json_lines_cut), (PROGRESS_FILE, _csv_cut)):
        path = os.path.join(logdir, name)
        if os.path.isfile(path):
            _truncate(path, cut(path, iteration), name, report)
    for path in sorted(glob.glob(os.path.join(logdir, EVENT_FILES))):
        _truncate(path, _events_cut(path, iteration), os.path.basename(path), report)
    return report


def last_logged_result(logdir: str) -> Optional[Dict[str, Any]]:
    """The last complete line of `logdir`'s result.json as a dict (None without one)."""
    path = os.path.join(logdir, RESULT_FILE)
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines(keepends=True)
    except OSError:
        return None
    for line in reversed(lines):
        record = _parse_json_line(line)
        if record is not None:
            return record
    return None


def _truncate(path: str, cut: "_Cut", name: str, report: Rewound) -> None:
    if cut.dropped or cut.offset < os.path.getsize(path):
        os.truncate(path, cut.offset)
        report.dropped[name] = cut.dropped


@dataclass
class _Cut:
    offset: int  # bytes kept
    dropped: int  # complete records dropped


def _parse_json_line(line: bytes) -> Optional[Dict[str, Any]]:
    if not line.endswith(b"\n"):
        return None  # the torn last line of a killed writer
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _iteration_of(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _json_lines_cut(path: str, iteration: int) -> _Cut:
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    kept, dropped = 0, 0
    for line in lines:
        record = _parse_json_line(line)
        if record is None:
            break  # torn
        found = _iteration_of(record.get(ITERATION_KEY))
        if dropped or (found is not None and found > iteration):
            dropped += 1
        else:
            kept += len(line)
    return _Cut(kept, dropped)


class _CountedLines:
    """The lines of a text, counting the bytes handed out (a CSV row may span lines: a
    quoted value holding a newline), so that a row's end is known as a file offset."""

    def __init__(self, text: str):
        self._lines = io.StringIO(text, newline="")
        self.bytes = 0
        self.last = ""

    def __iter__(self) -> "_CountedLines":
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.bytes += len(line.encode("utf-8"))
        self.last = line
        return line

    @property
    def at_line_end(self) -> bool:
        return self.last.endswith(("\n", "\r"))


def _csv_cut(path: str, iteration: int) -> _Cut:
    with open(path, encoding="utf-8", newline="") as f:
        lines = _CountedLines(f.read())
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return _Cut(0, 0)
    if not lines.at_line_end:
        return _Cut(0, 0)  # not even the header is whole: the logger writes it anew
    column = header.index(ITERATION_KEY) if ITERATION_KEY in header else None
    kept, dropped = lines.bytes, 0
    try:
        for row in reader:
            if not lines.at_line_end or len(row) != len(header):
                break  # torn
            found = _iteration_of(row[column]) if column is not None else None
            if dropped or (found is not None and found > iteration):
                dropped += 1
            else:
                kept = lines.bytes
    except csv.Error:
        pass
    return _Cut(kept, dropped)


def _events_cut(path: str, iteration: int) -> _Cut:
    # Lazily: protobuf (through tensorboardX) only when there is an event file to read.
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    with open(path, "rb") as f:
        data = f.read()
    pos, kept, dropped = 0, 0, 0
    while pos + 12 <= len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        end = pos + 12 + length + 4
        if end > len(data) or struct.unpack("<I", data[pos + 8:pos + 12])[0] != masked_crc32c(header):
            break
        body = data[pos + 12:pos + 12 + length]
        if struct.unpack("<I", data[end - 4:end])[0] != masked_crc32c(body):
            break
        try:
            event = event_pb2.Event.FromString(body)
        except Exception:  # protobuf's DecodeError: an unreadable record ends the file
            break
        found = next((v.simple_value for v in event.summary.value if v.tag == ITERATION_KEY), None)
        if dropped or (found is not None and found > iteration):
            dropped += 1
        else:
            kept = end
        pos = end
    return _Cut(kept, dropped)
