"""record_env / render_env: real MP4 files from real envs, read back frame by frame."""
from __future__ import annotations

import glob
import os

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("moviepy")
imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")

from rlfleet.algorithms.ppo import PPOTrainer  # noqa: E402

TINY = dict(train_batch_size=200, sgd_minibatch_size=100, num_sgd_iter=1, rollout_fragment_length=200,
            model={"fcnet_hiddens": [8]}, seed=2)


def _frames(path: str):
    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(height, width, 3) for f in reader]
    return meta, frames


def test_record_env_true_writes_training_videos_in_the_run_folder(tmp_path):
    trainer = PPOTrainer(env="CartPole-v1", config=dict(TINY, record_env=True), logdir=str(tmp_path))
    result = trainer.train()
    trainer.stop()
    videos = sorted(glob.glob(str(tmp_path / "videos" / "*.mp4")))
    names = [os.path.basename(v) for v in videos]
    # Episodes 0, 1, 8, ... of sub-env 0 of the local worker (the one that samples).
    assert names[:2] == ["training-worker0-episode-0.mp4", "training-worker0-episode-1.mp4"]
    assert result["episodes_this_iter"] >= 2
    meta, frames = _frames(videos[0])
    assert meta["fps"] == 50  # CartPole's render_fps
    # One frame per step plus the reset frame: the first episode's length.
    assert len(frames) - 1 == result["hist_stats"]["episode_lengths"][0]
    assert frames[0].shape == (400, 600, 3)
    assert frames[0].std() > 1  # a picture, not a blank
    assert not np.array_equal(frames[0], frames[-1])  # the pole moved


def test_record_env_folder_for_evaluation_on_another_env(tmp_path):
    config = dict(TINY, record_env="vids", evaluation_interval=1, evaluation_num_episodes=1,
                  evaluation_config={"explore": False}, seed=5, env_config={"max_episode_steps": 60})
    trainer = PPOTrainer(env="Pendulum-v1", config=config, logdir=str(tmp_path))
    result = trainer.train()
    trainer.stop()
    assert result["evaluation"]["episodes_this_iter"] == 1
    (video,) = glob.glob(str(tmp_path / "vids" / "evaluation-worker0-episode-0.mp4"))
    _, frames = _frames(video)
    assert len(frames) in (60, 61)  # 60 steps (+ the reset frame; ffmpeg may drop the last one)
    assert glob.glob(str(tmp_path / "vids" / "training-worker0-episode-0.mp4"))


class NoRenderModeEnv(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 1.0, True, False, {}


def test_record_env_names_the_fix_when_the_env_cannot_render(tmp_path):
    with pytest.raises(ValueError, match="'record_env' needs an env that renders RGB frames.*render_mode=None"):
        PPOTrainer(env=NoRenderModeEnv, config=dict(TINY, record_env=True), logdir=str(tmp_path))


def test_render_env_keeps_rgb_frames_without_a_display(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    trainer = PPOTrainer(env="Acrobot-v1", config=dict(TINY, render_env=True, num_envs_per_worker=2),
                         logdir=str(tmp_path))
    trainer.train()
    envs = trainer.workers.local_worker().env.envs
    frames = envs[0].frames
    assert len(frames) == 200 and frames[-1].shape == (500, 500, 3)  # every step of the batch
    assert not hasattr(envs[1], "frames")  # only sub-env 0 renders
    trainer.stop()


def test_rlfleet_evaluate_video_records_the_episodes(tmp_path):
    from rlfleet import cli

    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path / "run"), config={
        "seed": 0, "rollout_fragment_length": 20, "train_batch_size": 20, "sgd_minibatch_size": 20,
        "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}})
    trainer.train()
    checkpoint = trainer.save()
    trainer.stop()
    videos = tmp_path / "videos"
    assert cli.main(["evaluate", checkpoint, "--episodes", "2", "--video", str(videos)]) == 0
    files = sorted(glob.glob(str(videos / "*.mp4")))
    assert files, os.listdir(videos) if videos.exists() else "no video folder"
    _, frames = _frames(files[0])
    assert len(frames) > 2 and frames[0].std() > 0  # a real, non-blank recording of an episode
