"""The experiment trackers on real services: MLflow against a real `mlflow server` on
127.0.0.1 (read back through MLflow's client), W&B offline (its run file read back), both as
`logger_config` types of `rlfleet train` / a Trainer and as Tune callbacks; their options
checked, a missing package named with its extra."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from rlfleet.cli import main

_PPO = {"train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 1, "lr": 0.0007, "seed": 3}


def _results(run: Path) -> List[Dict[str, Any]]:
    with open(run / "result.json", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path) -> Iterator[str]:
    """A real `mlflow server` on 127.0.0.1 with a temporary SQLite store and artifact folder."""
    pytest.importorskip("mlflow")
    port = _free_port()
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path / 'store.db'}",
                             "--artifacts-destination", str(tmp_path / "artifacts")], stdout=log, stderr=log,
                            start_new_session=True)  # its own process group: the server and its workers
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the test is over: nothing of the server needs a clean exit
        proc.wait(timeout=30)
        log.close()


@pytest.mark.slow
def test_rlfleet_train_logs_to_a_real_mlflow_server(mlflow_server, tmp_path):
    from mlflow.tracking import MlflowClient

    config = dict(_PPO, logger_config={"type": ["JsonLogger", "MLflowLogger"],
                                       "mlflow": {"tracking_uri": mlflow_server, "experiment_name": "cartpole",
                                                  "tags": {"team": "rl"}}})
    assert main(["train", "--run", "PPO", "--env", "CartPole-v1", "-q", "--local-dir", str(tmp_path / "runs"),
                 "--stop", '{"training_iteration": 3}', "--checkpoint-freq", "2",
                 "--config", json.dumps(config)]) == 0
    (run,) = (tmp_path / "runs").iterdir()
    client = MlflowClient(tracking_uri=mlflow_server)
    (logged,) = client.search_runs([client.get_experiment_by_name("cartpole").experiment_id])
    assert logged.info.run_name == run.name and logged.info.status == "FINISHED"
    assert logged.data.params["lr"] == "0.0007" and logged.data.params["env"] == "CartPole-v1"
    assert logged.data.tags["team"] == "rl"
    history = client.get_metric_history(logged.info.run_id, "episode_reward_mean")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == \
        [(r["timesteps_total"], r["episode_reward_mean"]) for r in _results(run)]
    files = [f.path for f in client.list_artifacts(logged.info.run_id, "checkpoint_2")]
    assert "checkpoint_2/manifest.json" in files
    assert not (tmp_path / "runs" / "mlflow").exists()  # a tracking URI given: no local store


@pytest.mark.slow
def test_mlflow_defaults_to_a_local_store_beside_the_runs(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(config=dict(_PPO, env="CartPole-v1", logger_config={"type": "MLflowLogger"}),
                         logdir=str(tmp_path / "run"))
    trainer.train()
    trainer.save()
    trainer.stop()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}")
    (logged,) = client.search_runs([client.get_experiment_by_name("rlfleet").experiment_id])
    assert len(client.get_metric_history(logged.info.run_id, "timesteps_total")) == 1
    assert (tmp_path / "mlflow" / "artifacts" / logged.info.run_id / "artifacts" / "checkpoint_1"
            / "manifest.json").is_file()


def _wandb_records(path: Path) -> Iterator[Any]:
    """The records of a W&B run file: W&B's LevelDB-style log (a 7-byte ":W&B" header, then
    32 KiB blocks of chunks, each `crc32 (4) | length (2) | type (1: full, 2: first, 3:
    middle, 4: last)`) of `wandb_internal_pb2.Record` messages."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if pos + 7 + length > len(data):  # a chunk still being written
            return
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def _wandb_run(folder: Path) -> Dict[str, Any]:
    (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    # W&B's service writes the file behind `run.finish()` (now and then it holds only its
    # header when finish returns): read it once it ends with the run's "exit" record.
    deadline = time.monotonic() + 60
    while not any(r.WhichOneof("record_type") == "exit" for r in _wandb_records(path)):
        assert time.monotonic() < deadline, f"{path} never got the run's exit record"
        time.sleep(0.2)
    out: Dict[str, Any] = {"history": [], "artifacts": [], "config": {}}
    for record in _wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            out["history"].append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                                   for item in record.history.item})
        elif kind == "artifact":
            out["artifacts"].append((record.artifact.name, [c.path for c in record.artifact.manifest.contents]))
        elif kind == "run":
            out["name"] = record.run.display_name
            out["config"] = {item.key: json.loads(item.value_json) for item in record.run.config.update}
    return out


def test_wandb_offline_run_holds_config_metrics_and_checkpoints(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # no network, whoever runs the tests
    monkeypatch.setenv("WANDB_SILENT", "true")
    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(config=dict(_PPO, env="CartPole-v1", logger_config={
        "type": ["JsonLogger", "WandbLogger"], "wandb": {"project": "cartpole"}}), logdir=str(tmp_path / "run"))
    trainer.train()
    trainer.save()
    trainer.train()
    trainer.stop()
    run = _wandb_run(tmp_path / "run")
    assert run["name"] == "run" and run["config"]["lr"] == 0.0007  # the config as it is, nested
    assert run["config"]["model"]["fcnet_hiddens"] == [256, 256]
    assert [(h["_step"], h["episode_reward_mean"]) for h in run["history"]] == \
        [(r["timesteps_total"], r["episode_reward_mean"]) for r in _results(tmp_path / "run")]
    ((name, files),) = run["artifacts"]
    assert name == "run-checkpoint_1" and "manifest.json" in files


def test_tracker_options_are_checked(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer

    def make(logger_config):
        return PPOTrainer(config=dict(_PPO, env="CartPole-v1", logger_config=logger_config),
                          logdir=str(tmp_path / "run"))

    with pytest.raises(ValueError, match="logger_config.mlfow"):
        make({"type": ["JsonLogger", "MLflowLogger"], "mlfow": {}})
    with pytest.raises(ValueError, match="logger_config.mlflow"):  # a tracker's options without the tracker
        make({"type": "JsonLogger", "mlflow": {"experiment_name": "x"}})
    pytest.importorskip("mlflow")
    with pytest.raises(ValueError, match=r"logger_config.mlflow: unknown option\(s\) 'experiment'; known: .*"
                                         r"experiment_name"):
        make({"type": "MLflowLogger", "mlflow": {"experiment": "x"}})


def test_a_missing_tracker_package_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    code = main(["train", "--run", "PPO", "--env", "CartPole-v1", "--local-dir", str(tmp_path), "--stop",
                 '{"training_iteration": 1}', "--config", json.dumps({"logger_config": {"type": "WandbLogger"}})])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["rlfleet train: error: the optional package 'wandb' is not installed; install it "
                                 "with: pip install \"rlfleet[wandb]\" (run with -v for the traceback)"]
    assert os.listdir(tmp_path) == []  # the run never started


@pytest.mark.slow
def test_tune_callbacks_track_each_trial(ray_session, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    tune = pytest.importorskip("ray.tune")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    from mlflow.tracking import MlflowClient

    import rlfleet.tune
    from rlfleet.algorithms.ppo import PPOTrainer
    
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tuner = tune.Tuner(rlfleet.tune.trainable(PPOTrainer), param_space=dict(
        _PPO, env="CartPole-v1", lr=tune.grid_search([1e-3, 1e-4])), run_config=tune.RunConfig(
            name="sweep", storage_path=str(tmp_path), stop={"training_iteration": 2}, verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
            callbacks=[rlfleet.tune.mlflow_callback(tracking_uri=store), rlfleet.tune.wandb_callback(project="sweep")]))
    grid = tuner.fit()
    assert not grid.errors
    client = MlflowClient(tracking_uri=store)
    logged = client.search_runs([client.get_experiment_by_name("rlfleet").experiment_id])
    assert sorted(r.data.params["lr"] for r in logged) == ["0.0001", "0.001"]
    for run in logged:
        assert run.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run.info.run_id, "training_iteration")] == [200, 400]
        assert sorted(f.path for f in client.list_artifacts(run.info.run_id)) == ["checkpoint_1", "checkpoint_2"]
    assert (tmp_path / "artifacts").is_dir()  # beside the SQLite store given, not in the working folder
    trials = [Path(result.path) for result in grid]
    assert sorted(_wandb_run(trial)["config"]["lr"] for trial in trials) == [0.0001, 0.001]
    assert all(len(_wandb_run(trial)["history"]) == 2 and len(_wandb_run(trial)["artifacts"]) == 2
               for trial in trials)
    from rlfleet.results.run_summary import summarize_run

    for trial in trials:  # `rlfleet runs` reads Tune's trial folders too
        summary = summarize_run(str(trial))
        assert (summary.algorithm, summary.env, summary.status, summary.steps) == \
            ("PPO", "CartPole-v1", "finished", 400)
