"""The DeepMind Atari preprocessing (Mnih et al. 2015), as Gymnasium wrappers.

`wrap_deepmind(env, dim=84, framestack=True)` applies, outermost last:

1. `NoopResetEnv`: 1..30 no-op steps after each reset (random start states);
2. `MaxAndSkipEnv`: repeat each action 4 frames, sum the rewards, max-pool the last two
   frames (Atari sprites flicker) - only when the env does not skip frames itself
   (`*NoFrameskip*` ids, `frameskip=1`); `ALE/*-v5` envs skip 4 frames already;
3. `EpisodicLifeEnv`: a lost life ends the episode for learning; the game resets only
   when it is really over;
4. `FireResetEnv`: press FIRE after reset in games that need it to start;
5. `WarpFrame`: grayscale, resized to `dim` x `dim` (area interpolation, no OpenCV);
6. `FrameStack`: the last 4 frames stacked on the channel axis.

Observations stay uint8 end to end (`[dim, dim, 4]`); the vision net scales them.
Reward clipping is the sampler's job (`clip_rewards: None` sign-clips Atari rewards).
The RolloutWorker applies `wrap_deepmind` to Atari envs when `preprocessor_pref` is
"deepmind" (the default), with `model.dim` and `model.framestack`.

The wrappers need only the ALE's `get_action_meanings()` and `ale.lives()` (or `lives()`).
"""
from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlfleet.env.atari_detection import is_atari


def _lives(env: gym.Env) -> int:
    u = env.unwrapped
    ale = getattr(u, "ale", None)
    return int(ale.lives() if ale is not None else u.lives())


def _action_meanings(env: gym.Env) -> list:
    return list(env.unwrapped.get_action_meanings())


class NoopResetEnv(gym.Wrapper):
    """After each reset, take a random number (1..`noop_max`) of no-op (action 0) steps."""

    def __init__(self, env: gym.Env, noop_max: int = 30):
        super().__init__(env)
        if _action_meanings(env)[0] != "NOOP":
            raise ValueError(f"NoopResetEnv needs action 0 to be NOOP, got {_action_meanings(env)[0]!r}")
        self.noop_max = int(noop_max)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(int(self.np_random.integers(1, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class FireResetEnv(gym.Wrapper):
    """Press FIRE (then action 2) after each reset, for games that wait for it."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = _action_meanings(env)
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise ValueError(f"FireResetEnv needs action 1 to be FIRE and 3+ actions, got {meanings}")

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs = info = None
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class EpisodicLifeEnv(gym.Wrapper):
    """A lost life ends the episode (`terminated`); `reset` restarts the game only after a
    real game over, else it continues from the state after the lost life."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = bool(terminated or truncated)
        lives = _lives(self.env)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            # A no-op step to move on from the lost-life state.
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = _lives(self.env)
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    """Repeat each action `skip` frames; return the summed reward and the pixel-wise max of
    the last two frames."""

    def __init__(self, env: gym.Env, skip: int = 4):
        super().__init__(env)
        self.skip = int(skip)

    def step(self, action):
        total = 0.0
        last = prev = None
        terminated = truncated = False
        info: dict = {}
        for _ in range(self.skip):
            prev = last
            last, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        frame = last if prev is None else np.maximum(prev, last)
        return frame, total, terminated, truncated, info


def resize_area(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Area-interpolated resize of an `[H, W]` or `[H, W, C]` uint8 image (OpenCV's
    INTER_AREA for downscaling), done with torch."""
    x = torch.from_numpy(np.ascontiguousarray(frame)).float()
    x = x[None, None] if x.dim() == 2 else x.permute(2, 0, 1)[None]
    y = F.interpolate(x, size=(height, width), mode="area")[0]
    y = y[0] if frame.ndim == 2 else y.permute(1, 2, 0)
    return y.round_().clamp_(0, 255).to(torch.uint8).numpy()


def to_grayscale(frame: np.ndarray) -> np.ndarray:
    """RGB `[H, W, 3]` -> luminance `[H, W]` (ITU-R 601 weights, as OpenCV), float32."""
    return frame[..., 0] * np.float32(0.299) + frame[..., 1] * np.float32(0.587) + frame[..., 2] * np.float32(0.114)


class WarpFrame(gym.ObservationWrapper):
    """Grayscale, resized to `dim` x `dim`: uint8 `[dim, dim, 1]` observations."""

    def __init__(self, env: gym.Env, dim: int = 84):
        super().__init__(env)
        self.dim = int(dim)
        self.observation_space = gym.spaces.Box(0, 255, (self.dim, self.dim, 1), np.uint8)

    def observation(self, obs):
        frame = np.asarray(obs)
        gray = to_grayscale(frame.astype(np.float32)) if frame.ndim == 3 else frame.astype(np.float32)
        return resize_area(gray, self.dim, self.dim)[..., None]


class FrameStack(gym.Wrapper):
    """The last `k` observations concatenated on the last (channel) axis."""

    def __init__(self, env: gym.Env, k: int = 4):
        super().__init__(env)
        self.k = int(k)
        self.frames: deque = deque(maxlen=self.k)
        space = env.observation_space
        low = np.repeat(space.low, self.k, axis=-1)
        high = np.repeat(space.high, self.k, axis=-1)
        self.observation_space = gym.spaces.Box(low, high, dtype=space.dtype)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.k):
            self.frames.append(obs)
        return self._obs(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return self._obs(), reward, terminated, truncated, info

    def _obs(self) -> np.ndarray:
        return np.concatenate(list(self.frames), axis=-1)


def _skips_frames_itself(env: gym.Env) -> bool:
    return int(getattr(env.unwrapped, "_frameskip", 1) or 1) != 1


def wrap_deepmind(env: gym.Env, dim: int = 84, framestack: bool = True, noop_max: int = 30) -> gym.Env:
    """The DeepMind preprocessing stack (see the module docstring).

    Args:
        env: an ALE env (or one with the same `get_action_meanings` / `lives` API).
        dim: side length of the square grayscale frames.
        framestack: stack the last 4 frames.
        noop_max: most no-op steps after a reset.

    Returns:
        The wrapped env, with uint8 `[dim, dim, 4]` (or `[dim, dim, 1]`) observations.
    """
    env = NoopResetEnv(env, noop_max=noop_max)
    if not _skips_frames_itself(env):
        env = MaxAndSkipEnv(env, skip=4)
    env = EpisodicLifeEnv(env)
    if "FIRE" in _action_meanings(env):
        env = FireResetEnv(env)
    env = WarpFrame(env, dim)
    if framestack:
        env = FrameStack(env, 4)
    return env


class GenericPixelFrame(gym.ObservationWrapper):
    """`preprocessor_pref: "rllib"` for Atari frames: resized to `dim` x `dim` (grayscale
    `[dim, dim, 1]` when `grayscale`), kept uint8: the model scales the pixels, to [-1, 1]
    or [0, 1] as `model.zero_mean` says."""

    def __init__(self, env: gym.Env, dim: int = 84, grayscale: bool = False):
        super().__init__(env)
        self.dim = int(dim)
        self.grayscale = bool(grayscale)
        channels = 1 if grayscale else int(env.observation_space.shape[-1])
        self.observation_space = gym.spaces.Box(0, 255, (self.dim, self.dim, channels), np.uint8)

    def observation(self, obs):
        frame = np.asarray(obs)
        if self.grayscale:
            return resize_area(to_grayscale(frame.astype(np.float32)), self.dim, self.dim)[..., None]
        return resize_area(frame, self.dim, self.dim)


def wrap_atari_for_config(env: gym.Env, config: dict) -> gym.Env:
    """The observation preprocessing `preprocessor_pref` asks for, for an Atari image env
    (other envs, and Atari RAM envs, pass through unchanged)."""
    space = env.observation_space
    if not (is_atari(env) and isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
        return env
    model = config.get("model") or {}
    if config.get("preprocessor_pref") == "deepmind":
        return wrap_deepmind(env, dim=int(model.get("dim", 84)), framestack=bool(model.get("framestack", True)))
    if config.get("preprocessor_pref") == "rllib":
        return GenericPixelFrame(env, dim=int(model.get("dim", 84)), grayscale=bool(model.get("grayscale", False)))
    return env


__all__ = [
    "NoopResetEnv", "FireResetEnv", "EpisodicLifeEnv", "MaxAndSkipEnv", "WarpFrame", "FrameStack",
    "GenericPixelFrame", "wrap_deepmind", "wrap_atari_for_config", "is_atari", "resize_area",
    "with_atari_preprocessing", "AtariPreprocessingCreator",
]


class AtariPreprocessingCreator:
    """Wraps an env creator so that the envs it makes get `wrap_atari_for_config`.

    A class holding only plain config values, so it pickles to remote workers and envs.
    """

    def __init__(self, env_creator, config: dict):
        self.env_creator = env_creator
        model = config.get("model") or {}
        self.config = {
            "preprocessor_pref": config.get("preprocessor_pref"),
            "model": {k: model.get(k) for k in ("dim", "framestack", "grayscale") if k in model},
        }

    def __call__(self, env_context):
        return wrap_atari_for_config(self.env_creator(env_context), self.config)

    def __repr__(self) -> str:
        return f"AtariPreprocessingCreator({self.env_creator!r}, {self.config!r})"


def with_atari_preprocessing(env_creator, config: dict):
    """`env_creator`, wrapped to preprocess Atari envs as `preprocessor_pref` asks (not when
    a `model.custom_preprocessor` is set: RLlib 1.x's `RolloutWorker` skips them then)."""
    if env_creator is None or isinstance(env_creator, AtariPreprocessingCreator):
        return env_creator
    if config.get("preprocessor_pref") not in ("deepmind", "rllib"):
        return env_creator
    if (config.get("model") or {}).get("custom_preprocessor"):
        return env_creator
    return AtariPreprocessingCreator(env_creator, config)
