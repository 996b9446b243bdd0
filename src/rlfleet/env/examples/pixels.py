"""A small image env: the right action depends on where a bright spot is."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np


class BrightPixelEnv(gym.Env):
    """`size` x `size` x 3 uint8 images, dark noise with one bright `spot` x `spot` square
    in one of four quadrants; action i (0..3) earns +1 when the square is in quadrant i.
    Every step shows a new image; episodes last `episode_len` steps.

    A random policy earns 1/4 per step; one that reads the image earns 1.

    env_config keys: `size` (default 42), `spot` (default 4), `episode_len` (default 10),
    `noise` (default 40: background pixels are uniform in [0, noise); 0 gives a black
    background, which LZ4 compresses well, unlike the noise).
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        self.size = int(cfg.get("size", 42))
        self.spot = int(cfg.get("spot", 4))
        self.episode_len = int(cfg.get("episode_len", 10))
        self.noise = int(cfg.get("noise", 40))
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self._t = 0
        self._quadrant = 0

    def _image(self) -> np.ndarray:
        rng = self.np_random
        if self.noise > 0:
            img = rng.integers(0, self.noise, (self.size, self.size, 3), dtype=np.uint8)
        else:
            img = np.zeros((self.size, self.size, 3), np.uint8)
        self._quadrant = int(rng.integers(4))
        half = self.size // 2
        row0 = (self._quadrant // 2) * half
        col0 = (self._quadrant % 2) * half
        r = row0 + int(rng.integers(0, half - self.spot + 1))
        c = col0 + int(rng.integers(0, half - self.spot + 1))
        img[r:r + self.spot, c:c + self.spot] = 255
        return img

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._t = 0
        return self._image(), {}

    def step(self, action: Any):
        reward = float(int(action) == self._quadrant)
        self._t += 1
        return self._image(), reward, False, self._t >= self.episode_len, {}
