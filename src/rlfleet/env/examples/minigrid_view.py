"""MiniGrid (the `minigrid` package, `pip install rlfleet[minigrid]`) as a flat partial view: the
agent sees only its own 7x7 egocentric view, never its position or the goal's."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np


class MiniGridView(gym.Wrapper):
    """A MiniGrid env whose observation is the agent's egocentric view (`image`: object,
    colour and state index per cell of 7x7), flattened to float32 (147 values in [0, 10]);
    the mission text and the direction are dropped. Reward and episode end are MiniGrid's:
    1 - 0.9 x steps / max_steps on reaching the goal, else 0.

    env_config keys: `id` (default "MiniGrid-Empty-16x16-v0"), `num_actions` (default: all of
    the env's; 3 keeps turn left, turn right and forward, all that navigation needs); the others
    go to `gym.make`.

    Raises:
        ImportError: naming the extra when `minigrid` is not installed.
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        env_id = cfg.pop("id", "MiniGrid-Empty-16x16-v0")
        num_actions = cfg.pop("num_actions", None)
        try:
            import minigrid
        except ImportError as e:
            raise ImportError(f"MiniGridView({env_id!r}) needs the `minigrid` package: pip install "
                              f"'rlfleet[minigrid]' ({e})") from None
        # minigrid 2.x registers its ids through an entry point that Gymnasium 1.x skips.
        if not any(name.startswith("MiniGrid-") for name in gym.registry):
            minigrid.register_minigrid_envs()
        super().__init__(gym.make(env_id, **cfg))
        shape = self.env.observation_space["image"].shape
        self.observation_space = gym.spaces.Box(0.0, 10.0, (int(np.prod(shape)),), np.float32)
        if num_actions is not None:
            if not 1 <= int(num_actions) <= self.env.action_space.n:
                raise ValueError(f"env_config.num_actions must be in [1, {self.env.action_space.n}] for {env_id}, "
                                 f"got {num_actions!r}")
            self.action_space = gym.spaces.Discrete(int(num_actions))

    def _view(self, obs: Any) -> np.ndarray:
        return np.asarray(obs["image"], np.float32).reshape(-1)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._view(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._view(obs), float(reward), terminated, truncated, info
