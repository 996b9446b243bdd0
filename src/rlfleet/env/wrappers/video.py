"""`record_env` and `render_env`: video files and rendering of one sub-env.

One env renders, the one RLlib 1.x's `RolloutWorker` renders: sub-env 0 of the worker that
samples (the local worker when `num_workers` is 0, else remote worker 1), in training and, separately, in evaluation.

- `record_env: True` (the run folder's `videos/`) or a folder (relative to the run folder,
  or absolute): Gymnasium's `RecordVideo` writes `<training|evaluation>-worker<i>-episode-<n>.mp4`
  for episodes 0, 1, 8, 27, 64, ... 1000, 2000, ... of that env (needs moviepy:
  `pip install 'rlfleet[video]'`).
- `render_env: True`: that env renders each step: in a window (`render_mode="human"`) when a
  display is available, else as RGB frames kept on the wrapper (`RenderFrames.frames`, the
  last `MAX_KEPT_FRAMES`).

For a Gymnasium id the render mode is passed to `gym.make` (unless `env_config` sets
`render_mode` itself); an env from a creator or class must take it from `env_config`.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections import deque
from typing import Any, Callable, Deque, Optional

import gymnasium as gym

VIDEO_INSTALL_HINT = "pip install 'rlfleet[video]'"
MAX_KEPT_FRAMES = 1000


def renders_here(config: dict, worker_index: int, num_workers: int) -> bool:
    """Whether this worker's sub-env 0 is the one that records / renders."""
    return worker_index == (1 if num_workers > 0 else 0)


def video_folder(record_env: Any, log_dir: Optional[str]) -> str:
    """Where `record_env` puts videos: True -> `<log_dir>/videos`; a relative folder under
    `log_dir`; an absolute one as is."""
    base = log_dir or os.getcwd()
    if record_env is True:
        return os.path.join(base, "videos")
    return os.path.join(base, os.path.expanduser(str(record_env)))


def _has_display() -> bool:
    return sys.platform in ("win32", "darwin") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class RenderFrames(gym.Wrapper):
    """Keeps the frames `render()` returns (an `rgb_array` env rendered by `render_env`)."""

    def __init__(self, env: gym.Env, max_frames: int = MAX_KEPT_FRAMES):
        super().__init__(env)
        self.frames: Deque[Any] = deque(maxlen=max_frames)

    def render(self) -> Any:
        frame = self.env.render()
        if frame is not None:
            self.frames.append(frame)
        return frame


class _FirstEpisodes:
    """RecordVideo's `episode_trigger` for episodes 0 .. n - 1 (a class: Ray ships it)."""

    def __init__(self, n: int):
        self.n = n

    def __call__(self, episode_id: int) -> bool:
        return episode_id < self.n


class VideoEnvCreator:
    """An env creator whose sub-env 0 records videos and/or renders; other sub-envs are
    made as by `env_creator` (a class, so that Ray can ship it to remote envs).

    Args:
        env_creator: the creator to wrap.
        gym_id: whether `env_creator` makes a Gymnasium id (then `render_mode` is passed).
        folder: the video folder (None: no recording).
        name_prefix: the video files' prefix.
        render: `render_env`.
        episodes: record the first this many episodes (`_record_env_episodes`); None:
            Gymnasium's schedule 0, 1, 8, 27, ...
    """

    def __init__(self, env_creator: Callable, *, gym_id: bool, folder: Optional[str], name_prefix: str,
                 render: bool, episodes: Optional[int] = None):
        self.episodes = episodes
        self.env_creator = env_creator
        self.gym_id = gym_id
        self.folder = folder
        self.name_prefix = name_prefix
        self.render = render

    def __getattr__(self, name: str) -> Any:  # e.g. `.cls` of a class creator
        if name == "env_creator":
            raise AttributeError(name)
        return getattr(self.env_creator, name)

    def __call__(self, ctx: Any) -> Any:
        if getattr(ctx, "vector_index", 0) != 0:
            return self.env_creator(ctx)
        # Recording needs RGB frames; rendering shows a window where there is a display.
        mode = "rgb_array" if self.folder is not None or not _has_display() else "human"
        if self.gym_id and "render_mode" not in ctx:
            ctx = ctx.copy_with_overrides(env_config=dict(ctx, render_mode=mode))
        env = self.env_creator(ctx)
        if not isinstance(env, gym.Env):
            raise ValueError(f"'record_env' / 'render_env' work with single-agent Gymnasium envs; the env is a "
                             f"{type(env).__name__}. Use False")
        actual = getattr(env, "render_mode", None)
        if self.folder is not None:
            if actual not in ("rgb_array", "rgb_array_list"):
                raise ValueError(f"'record_env' needs an env that renders RGB frames, but sub-env 0 has "
                                 f"render_mode={actual!r}; make the env with render_mode='rgb_array' (e.g. "
                                 f"env_config={{'render_mode': 'rgb_array'}}, passed on by your env creator)")
            try:
                import moviepy  # noqa: F401  (RecordVideo writes with it)
            except ImportError:
                raise ImportError(f"'record_env' writes videos with moviepy; install it with: "
                                  f"{VIDEO_INSTALL_HINT}") from None
            with warnings.catch_warnings():
                # Training and evaluation share the folder (their files have their own prefixes);
                # RecordVideo would warn about "overwriting" whenever the folder exists.
                warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
                # None: Gymnasium's schedule. The sampler resets the env after the last episode asked
                # for; a trigger that stops there writes no video of a next, never-run one.
                trigger = None if self.episodes is None else _FirstEpisodes(self.episodes)
                env = gym.wrappers.RecordVideo(env, self.folder, name_prefix=self.name_prefix, disable_logger=True,
                                               episode_trigger=trigger)
        elif self.render and actual in ("rgb_array", "rgb_array_list"):
            env = RenderFrames(env)
        return env


def with_video(env_creator: Optional[Callable], config: dict, *, worker_index: int, num_workers: int,
               log_dir: Optional[str]) -> Optional[Callable]:
    """`env_creator` wrapped for `record_env` / `render_env` on the worker that renders
    (see `renders_here`); unchanged otherwise."""
    record, render = config.get("record_env"), config.get("render_env")
    if env_creator is None or not (record or render) or not renders_here(config, worker_index, num_workers):
        return env_creator
    env = config.get("env")
    gym_id = isinstance(env, str) and env in gym.registry
    phase = "evaluation" if config.get("in_evaluation") else "training"
    folder = video_folder(record, log_dir) if record else None
    return VideoEnvCreator(env_creator, gym_id=gym_id, folder=folder, name_prefix=f"{phase}-worker{worker_index}",
                           render=bool(render), episodes=config.get("_record_env_episodes"))


__all__ = ["RenderFrames", "VideoEnvCreator", "renders_here", "video_folder", "with_video", "VIDEO_INSTALL_HINT"]
