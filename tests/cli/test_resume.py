"""`rlfleet train --resume`: a run killed with SIGKILL right after a checkpoint, resumed, equals
the uninterrupted run (weights bit-identical at every later iteration, one log record per
iteration); a finished run is left alone; folders that are no runs are named as such; timed
checkpoints; `-f FILE --resume`."""
from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from rlfleet import cli
from rlfleet.checkpoint import list_checkpoints, read_checkpoint
from tests.helpers import REPO_ROOT, read_tb_scalars

PPO = {"seed": 3, "num_envs_per_worker": 2, "rollout_fragment_length": 50, "train_batch_size": 200,
       "sgd_minibatch_size": 64, "num_sgd_iter": 2, "observation_filter": "MeanStdFilter",
       "model": {"fcnet_hiddens": [16]}}
# Off-policy with its replay buffer in the checkpoints; min_iter_time_s 0: iterations end by
# steps, not by the clock.
DQN = {"seed": 3, "train_batch_size": 32, "learning_starts": 32, "timesteps_per_iteration": 100,
       "min_iter_time_s": 0, "rollout_fragment_length": 4, "store_buffer_in_checkpoints": True,
       "model": {"fcnet_hiddens": [16]}}
STOP_AT = 6
KILL_AFTER = 2


def _train(local_dir, algo, config, *extra):
    return [sys.executable, "-m", "rlfleet.cli", "train", "--run", algo, "--env", "CartPole-v1", "--config",
            json.dumps(config), "--stop", json.dumps({"training_iteration": STOP_AT}), "--checkpoint-freq", "1",
            "--local-dir", str(local_dir), "-q", *extra]


def _env(ray_address=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)]))
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address  # the test session's Ray (conftest's ray_session), on 127.0.0.1
    return env


def _run_folder(local_dir):
    (folder,) = glob.glob(os.path.join(str(local_dir), "*", ""))
    return folder.rstrip(os.sep)


def _weights(path):
    return read_checkpoint(path).state["worker"]["policies"]["default_policy"]["weights"]


def _logged_iterations(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "result.json"))]
    with open(os.path.join(run_dir, "progress.csv")) as f:
        header = f.readline().strip().split(",")
        column = header.index("training_iteration")
        csv_iterations = [int(line.split(",")[column]) for line in f]
    # One event file per process; TensorBoard orders the events by step (timesteps_total).
    tb_iterations = [int(v) for _, v in sorted(read_tb_scalars(run_dir)["training_iteration"])]
    return rows, csv_iterations, tb_iterations


def _kill_after_checkpoint(cmd, local_dir, env, log):
    """Starts `rlfleet train`, SIGKILLs it as soon as checkpoint_KILL_AFTER appears."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=str(REPO_ROOT), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    pattern = os.path.join(str(local_dir), "*", f"checkpoint_{KILL_AFTER}", "manifest.json")
    while not glob.glob(pattern) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, open(log).read()[-3000:]  # killed mid-run, not finished
    return _run_folder(local_dir)


def _check_resume_repeats_the_run(tmp_path, algo, config, ray_address=None):
    env = _env(ray_address)
    # The uninterrupted run, beside the one to be killed.
    reference = subprocess.Popen(_train(tmp_path / "ref", algo, config), env=env, cwd=str(REPO_ROOT),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    run_dir = _kill_after_checkpoint(_train(tmp_path / "killed", algo, config), tmp_path / "killed", env,
                                     tmp_path / "killed.log")
    assert json.load(open(os.path.join(run_dir, "run_status.json")))["status"] == "running"  # never closed
    resumed = subprocess.run([sys.executable, "-m", "rlfleet.cli", "train", "--resume", run_dir, "-q"], env=env,
                             cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert re.search(rf"Resuming .* from checkpoint_{KILL_AFTER} \(iteration {KILL_AFTER}, ", resumed.stdout)
    assert f"Stop criterion met: training_iteration = {STOP_AT}" in resumed.stdout  # the run's own stop
    out, _ = reference.communicate(timeout=300)
    assert reference.returncode == 0, out.decode()[-3000:]
    ref_dir = _run_folder(tmp_path / "ref")

    for k in range(KILL_AFTER + 1, STOP_AT + 1):  # bit-identical at every later iteration
        got, want = _weights(os.path.join(run_dir, f"checkpoint_{k}")), _weights(os.path.join(ref_dir, f"checkpoint_{k}"))
        assert set(got) == set(want)
        for name in want:
            assert got[name].tobytes() == want[name].tobytes(), (k, name)
    rows, csv_iterations, tb_iterations = _logged_iterations(run_dir)
    ref_rows, _, _ = _logged_iterations(ref_dir)
    every = list(range(1, STOP_AT + 1))
    assert [r["training_iteration"] for r in rows] == csv_iterations == tb_iterations == every
    for key in ("timesteps_total", "episodes_total", "episode_reward_mean"):
        assert [r[key] for r in rows] == [r[key] for r in ref_rows], key
    assert json.load(open(os.path.join(run_dir, "run_status.json")))["status"] == "finished"
    return run_dir


def test_killed_ppo_run_resumes_bit_identically(tmp_path, capsys):
    run_dir = _check_resume_repeats_the_run(tmp_path, "PPO", PPO)
    # Resuming a finished run says so and changes nothing.
    before = sorted(os.listdir(run_dir))
    assert cli.main(["train", "--resume", run_dir]) == 0
    assert "already finished (stop criteria met at iteration 6); nothing to resume" in capsys.readouterr().out
    assert sorted(os.listdir(run_dir)) == before


def test_killed_dqn_run_resumes_with_its_replay_buffer(tmp_path):
    _check_resume_repeats_the_run(tmp_path, "DQN", DQN)


@pytest.mark.slow
def test_killed_run_with_two_remote_workers_resumes_bit_identically(ray_session, tmp_path):
    config = dict(PPO, num_workers=2, num_cpus_per_worker=0.25, num_envs_per_worker=1)
    _check_resume_repeats_the_run(tmp_path, "PPO", config, ray_session.get_runtime_context().gcs_address)


# --- folders that cannot be resumed, and flags a resumed run cannot take --------------------------
def _usage_error(capsys, *argv):
    assert cli.main(list(argv)) == cli.EXIT_USAGE
    return capsys.readouterr().err


def test_resume_names_what_is_missing(tmp_path, capsys):
    assert "no folder at" in _usage_error(capsys, "train", "--resume", str(tmp_path / "nowhere"))
    err = _usage_error(capsys, "train", "--resume", str(tmp_path))
    assert "is not a run folder of `rlfleet train`: it has no run.json" in err
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"format": "rlfleet-run", "run": "PPO", "stop": {}}))
    err = _usage_error(capsys, "train", "--resume", str(run_dir))
    assert "holds no intact checkpoint to resume from: it has no checkpoint_<n>/ folder with a manifest.json" in err
    err = _usage_error(capsys, "train", "--resume", str(run_dir), "--config", '{"lr": 0.1}')
    assert "--config cannot change a run being resumed" in err
    err = _usage_error(capsys, "train", "--resume", str(run_dir), "--checkpoint-every-s", "-1")
    assert "checkpoint_every_s must be a number of seconds >= 0 (0: never), got -1.0" in err


def test_resume_refuses_a_run_still_training(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"format": "rlfleet-run", "run": "PPO", "stop": {}}))
    import psutil

    (run_dir / "run_status.json").write_text(json.dumps({
        "status": "running", "pid": os.getppid(), "pid_started": psutil.Process(os.getppid()).create_time(),
        "host": __import__("socket").gethostname()}))
    err = _usage_error(capsys, "train", "--resume", str(run_dir))
    assert f"is still being trained by process {os.getppid()}; stop it first" in err


# --- timed checkpoints ----------------------------------------------------------------------------
def test_timed_checkpoints_keep_only_the_newest_one(tmp_path, capsys):
    """Every iteration is due by time here: each timed checkpoint replaces the one before,
    while those due by --checkpoint-freq stay."""
    config = {"seed": 1, "train_batch_size": 100, "rollout_fragment_length": 50, "model": {"fcnet_hiddens": [8]}}
    code = cli.main(["train", "--run", "PG", "--env", "CartPole-v1", "--config", json.dumps(config),
        "--stop", '{"training_iteration": 5}', "--checkpoint-freq", "2", "--checkpoint-every-s", "0.000001",
        "--local-dir", str(tmp_path), "-q"])
    assert code == 0, capsys.readouterr().err
    names = [os.path.basename(p) for p in list_checkpoints(_run_folder(tmp_path))]
    assert names == ["checkpoint_2", "checkpoint_4", "checkpoint_5"]


# --- -f FILE --resume --------------------------------------------------------------------------------
def test_resume_experiments_of_a_file(tmp_path, capsys):
    config = {"seed": 2, "train_batch_size": 100, "rollout_fragment_length": 50, "model": {"fcnet_hiddens": [8]}}
    path = tmp_path / "exp.yaml"

    def write(stop):
        path.write_text(json.dumps({"pg-cartpole": {
            "run": "PG", "env": "CartPole-v1", "stop": {"training_iteration": stop}, "checkpoint_freq": 1,
            "local_dir": str(tmp_path / "runs"), "config": config}}))

    write(2)
    assert cli.main(["train", "-f", str(path), "--resume", "-q"]) == 0  # no run yet: starts one
    out = capsys.readouterr().out
    assert "no earlier run of it under" in out
    run_dir = _run_folder(tmp_path / "runs")
    assert cli.main(["train", "-f", str(path), "--resume", "-q"]) == 0
    assert "already finished" in capsys.readouterr().out
    write(3)  # a higher stop in the file: the same run goes on
    assert cli.main(["train", "-f", str(path), "--resume", "-q"]) == 0
    out = capsys.readouterr().out
    assert "Resuming" in out and "iteration 3" in out and _run_folder(tmp_path / "runs") == run_dir
    rows, csv_iterations, _ = _logged_iterations(run_dir)
    assert [r["training_iteration"] for r in rows] == csv_iterations == [1, 2, 3]
    config["lr"] = 0.5  # a changed config is named, and the run goes on as it started
    write(4)
    assert cli.main(["train", "-f", str(path), "--resume", "-q"]) == 0
    assert "changed since the run" in capsys.readouterr().out
    assert read_checkpoint(os.path.join(run_dir, "checkpoint_4")).manifest["user_config"].get("lr") is None


def test_resuming_without_the_replay_buffer_says_so(tmp_path, capsys):
    config = dict(DQN, store_buffer_in_checkpoints=False, timesteps_per_iteration=50)
    assert cli.main(["train", "--run", "DQN", "--env", "CartPole-v1", "--config", json.dumps(config), "--stop",
                     '{"training_iteration": 1}', "--checkpoint-freq", "1", "--local-dir", str(tmp_path), "-q"]) == 0
    capsys.readouterr()
    assert cli.main(["train", "--resume", _run_folder(tmp_path), "--stop", '{"training_iteration": 2}', "-q"]) == 0
    out = capsys.readouterr().out
    assert "hold no replay buffer (store_buffer_in_checkpoints: false)" in out
    assert "Stop criterion met: training_iteration = 2" in out
