"""`rlfleet train` end to end with the real algorithms, in a subprocess
(`python -m rlfleet.cli`) as a user runs it (one error case in-process through `main`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT

REPO = REPO_ROOT


def _rlfleet(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", RLFLEET_RESULTS_DIR=str(tmp_path / "default_results"))
    return subprocess.run([sys.executable, "-m", "rlfleet.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(REPO))


def _results_dir(stdout: str) -> Path:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("Results: "), stdout
    return Path(last[len("Results: "):])


def test_train_pg_two_iterations(tmp_path):
    proc = _rlfleet("train", "--run", "PG", "--env", "CartPole-v1", "--stop", '{"training_iteration": 2}',
                    "--config", '{"seed": 0, "train_batch_size": 100, "rollout_fragment_length": 100}',
                    "--local-dir", str(tmp_path), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    logdir = _results_dir(proc.stdout)
    assert logdir.parent == tmp_path and logdir.name.startswith("PG_CartPole-v1_")
    lines = (logdir / "result.json").read_text().splitlines()
    assert len(lines) == 2
    results = [json.loads(line) for line in lines]
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert [r["timesteps_total"] for r in results] == [100, 200]
    params = json.loads((logdir / "params.json").read_text())
    assert params["seed"] == 0 and params["train_batch_size"] == 100
    assert len((logdir / "progress.csv").read_text().splitlines()) == 3  # header + 2 rows
    assert "Stop criterion met: training_iteration" in proc.stdout


def test_train_from_tuned_yaml_with_stop_override(tmp_path):
    proc = _rlfleet("train", "-f", "tuned_examples/pg/cartpole-pg.yaml", "--stop", '{"training_iteration": 1}',
                    "--local-dir", str(tmp_path), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    logdir = _results_dir(proc.stdout)
    assert len((logdir / "result.json").read_text().splitlines()) == 1
    params = json.loads((logdir / "params.json").read_text())
    assert params["lr"] == 0.0004 and params["seed"] == 0  # the YAML's config


def test_bad_config_key_exits_2_naming_the_key(tmp_path):
    proc = _rlfleet("train", "--run", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}',
                    "--config", '{"num_worker": 0}', "--local-dir", str(tmp_path), tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "num_worker" in proc.stderr and "num_workers" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.glob("PPO_*")) == []  # no empty run folder left behind


def test_unknown_env_exits_2_in_process(tmp_path, capsys):
    # In-process through main(), the function the console script exits with.
    from rlfleet.cli import main

    code = main(["train", "--run", "PG", "--env", "CartPole-v2", "--stop", '{"training_iteration": 1}',
                 "--local-dir", str(tmp_path)])
    assert code == 2
    assert "CartPole-v1" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
