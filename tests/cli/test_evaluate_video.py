"""`rlfleet evaluate CKPT --video DIR` (issue 26): every episode recorded, DIR relative to the
caller's folder, no SDL "XDG_RUNTIME_DIR" noise without a display."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

pytest.importorskip("moviepy")

SRC = str(REPO_ROOT / "src")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from rlfleet.algorithms.ppo import PPOTrainer

    logdir = tmp_path_factory.mktemp("run")
    trainer = PPOTrainer(env="CartPole-v1", logdir=str(logdir), config=dict(
        train_batch_size=200, sgd_minibatch_size=100, num_sgd_iter=1, model={"fcnet_hiddens": [8]}, seed=1))
    trainer.train()
    path = trainer.save()
    trainer.stop()
    return path


def test_evaluate_video_records_every_episode_into_a_relative_folder(checkpoint, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "rlfleet.cli", "evaluate", checkpoint, "--episodes", "10",
                           "--video", "vids"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    names = sorted(os.listdir(tmp_path / "vids"))
    assert names == sorted(f"evaluation-worker0-episode-{i}.mp4" for i in range(10))
    assert "XDG_RUNTIME_DIR" not in proc.stderr + proc.stdout
