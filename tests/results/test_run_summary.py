"""`rlfleet runs` on real runs: the table's numbers are the runs' own, and the status follows
the run: running while its process lives, finished at a stop criterion, stopped from Python,
failed when its process is SIGKILLed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from rlfleet.cli import main
from rlfleet.results.run_summary import list_runs, summarize_run
from tests.helpers import REPO_ROOT


def test_runs_lists_every_run_with_its_own_numbers(sweep, capsys):
    assert main(["runs", str(sweep)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "algorithm", "env", "status", "best", "last", "steps", "time", "checkpoint"]
    assert len(lines) == 5
    for line, summary in zip(lines[1:], list_runs([str(sweep)])):
        with open(os.path.join(summary.path, "result.json"), encoding="utf-8") as f:
            returns = [json.loads(row)["episode_reward_mean"] for row in f]
        cells = line.split()
        assert cells[0] == summary.name and cells[1:4] == ["PPO", "CartPole-v1", "finished"]
        assert cells[4:7] == [f"{max(returns):.2f}", f"{returns[-1]:.2f}", "2400"]
        assert cells[8] == "checkpoint_6"


def test_a_run_stopped_from_python_is_stopped(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(config={"env": "CartPole-v1", "train_batch_size": 200, "sgd_minibatch_size": 100,
                                 "num_sgd_iter": 1}, logdir=str(tmp_path / "run"))
    trainer.train()
    assert summarize_run(trainer.logdir).status == "running"
    trainer.stop()
    assert summarize_run(trainer.logdir).status == "stopped"


def test_a_killed_run_is_running_then_failed(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "rlfleet.cli", "train", "--run", "PPO", "--env", "CartPole-v1",
                             "-q", "--local-dir", str(tmp_path), "--config",
                             '{"train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 1}'],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("*/result.json")) or not list(tmp_path.glob("*/result.json"))[0].read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the run never wrote a result"
            time.sleep(0.2)
        (run,) = [str(p.parent) for p in tmp_path.glob("*/result.json")]
        assert summarize_run(run).status == "running"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    summary = summarize_run(run)
    assert (summary.status, summary.reason) == ("failed", "its process is gone without closing the run (killed?)")


def test_a_run_that_raises_is_failed_with_the_error(tmp_path):
    import pytest

    from rlfleet import register_env
    from tests.envs import FaultyEnv

    register_env("faulty_for_status", FaultyEnv)
    # 5-step episodes, 100 steps an iteration: the 30th episode (iteration 2) raises.
    config = {"env_config": {"fault": "raise", "episode": 30}, "train_batch_size": 100, "rollout_fragment_length": 100,
              "sgd_minibatch_size": 50,
              "num_sgd_iter": 1}
    with pytest.raises(Exception, match="boom"):
        main(["train", "--run", "PPO", "--env", "faulty_for_status", "-q", "--local-dir", str(tmp_path),
              "--config", json.dumps(config)])
    (summary,) = list_runs([str(tmp_path)])
    assert summary.status == "failed" and "boom" in summary.reason and summary.steps == 100
