"""Rewinding a run folder's logs (result.json, progress.csv, TensorBoard event files) to an
iteration: records past it and the torn tail a killed writer leaves are cut, the rest is
kept byte for byte, and loggers holding the files open go on at the new end."""
from __future__ import annotations

import json
import os

from rlfleet.results.logger import UnifiedLogger
from rlfleet.results.rewind import last_logged_result, rewind_logs
from tests.helpers import read_tb_scalars


def _result(i, note="plain"):
    return {"training_iteration": i, "timesteps_total": 10 * i, "episode_reward_mean": float(i),
            "custom_metrics": {"note": note}}


def _log(logdir, iterations, notes=None):
    log = UnifiedLogger({"seed": 1}, str(logdir))
    for i in iterations:
        log.on_result(_result(i, (notes or {}).get(i, "plain")))
    return log


def _csv_iterations(logdir):
    import csv

    with open(os.path.join(logdir, "progress.csv"), newline="") as f:
        return [int(row["training_iteration"]) for row in csv.DictReader(f)]


def test_rewind_cuts_every_log_after_the_iteration(tmp_path):
    # A value holding a newline and a comma: a CSV row that spans two lines.
    _log(tmp_path, [1, 2, 3, 4, 5], notes={2: "two\nlines, quoted", 4: "é"}).close()
    kept = open(tmp_path / "result.json", "rb").read().splitlines(keepends=True)[:3]
    report = rewind_logs(str(tmp_path), 3)
    assert report.iterations_dropped == 2 and report.dropped["progress.csv"] == 2
    assert open(tmp_path / "result.json", "rb").read() == b"".join(kept)
    assert _csv_iterations(tmp_path) == [1, 2, 3]
    assert [v for _, v in read_tb_scalars(str(tmp_path))["training_iteration"]] == [1, 2, 3]
    assert rewind_logs(str(tmp_path), 3).dropped == {}  # nothing more to cut
    assert last_logged_result(str(tmp_path))["training_iteration"] == 3


def test_rewind_cuts_the_torn_tail_of_a_killed_writer(tmp_path):
    _log(tmp_path, [1, 2]).close()
    (event_file,) = [n for n in os.listdir(tmp_path) if n.startswith("events.out")]
    sizes = {n: os.path.getsize(tmp_path / n) for n in ("result.json", "progress.csv", event_file)}
    with open(tmp_path / "result.json", "a") as f:
        f.write('{"training_iteration": 3, "timest')
    with open(tmp_path / "progress.csv", "a") as f:
        f.write("3,30")
    with open(tmp_path / event_file, "ab") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00\x01\x02")
    rewind_logs(str(tmp_path), 5)  # nothing past iteration 5: only the torn records go
    assert {n: os.path.getsize(tmp_path / n) for n in sizes} == sizes
    assert last_logged_result(str(tmp_path))["training_iteration"] == 2


def test_loggers_holding_the_files_open_append_after_the_cut(tmp_path):
    """`Trainer.restore(run_dir)` rewinds after the trainer's loggers opened the files."""
    _log(tmp_path, [1, 2, 3]).close()
    log = UnifiedLogger({"seed": 1}, str(tmp_path))  # a resumed run's loggers
    rewind_logs(str(tmp_path), 1)
    for i in (2, 3):
        log.on_result(_result(i))
    log.close()
    rows = [json.loads(line) for line in open(tmp_path / "result.json")]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3]
    assert _csv_iterations(tmp_path) == [1, 2, 3]
    assert sorted(v for _, v in read_tb_scalars(str(tmp_path))["training_iteration"]) == [1, 2, 3]
