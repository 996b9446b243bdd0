"""MiniGrid (the `minigrid` package, `pip install rlfleet[minigrid]`) as a flat partial view: the
agent sees only its own 7x7 egocentric view, never its position or the goal's."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np

# The directions MiniGrid's agent can face (right, down, left, up).
NUM_DIRECTIONS = 4


class MiniGridView(gym.Wrapper):
    """A MiniGrid env whose observation is the agent's egocentric view (`image`: object,
    colour and state index per cell of 7x7), flattened to float32: 147 values in [0, 10], or,
    with `one_hot`, each index one-hot (7 x 7 x (11 + 6 + 3) = 980 values in {0, 1}, as RLlib
    1.x's `rllib/utils/exploration/tests/test_curiosity.py` encodes it); with `direction`, the
    way the agent faces follows (one-hot, 4 more values). The mission text is dropped. Reward and episode end are
    MiniGrid's: 1 - 0.9 x steps / max_steps on reaching the goal, else 0.

    env_config keys: `id` (default "MiniGrid-Empty-16x16-v0"), `num_actions` (default: all of
    the env's; 3 keeps turn left, turn right and forward, all that navigation needs), `one_hot`
    and `direction` (default False); the others go to `gym.make` (e.g. `max_steps`).

    Raises:
        ImportError: naming the extra when `minigrid` is not installed.
        ValueError: for a `num_actions` out of range or a non-bool `one_hot` / `direction`.
    """

    def __init__(self, env_config: Optional[dict] = None):
        cfg = dict(env_config or {})
        env_id = cfg.pop("id", "MiniGrid-Empty-16x16-v0")
        num_actions = cfg.pop("num_actions", None)
        self.one_hot, self.direction = (cfg.pop(key, False) for key in ("one_hot", "direction"))
        for key, value in (("one_hot", self.one_hot), ("direction", self.direction)):
            if not isinstance(value, bool):
                raise ValueError(f"env_config.{key} must be true or false, got {value!r}")
        try:
            import minigrid
            from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX
        except ImportError as e:
            raise ImportError(f"MiniGridView({env_id!r}) needs the `minigrid` package: pip install "
                              f"'rlfleet[minigrid]' ({e})") from None
        # minigrid registers its ids through an entry point that Gymnasium 1.x skips.
        if not any(name.startswith("MiniGrid-") for name in gym.registry):
            minigrid.register_minigrid_envs()
        super().__init__(gym.make(env_id, **cfg))
        shape = self.env.observation_space["image"].shape
        # One block of one-hot values per channel of a cell: object, colour, state.
        self._channel_sizes = (len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX))
        cells = int(np.prod(shape[:-1]))
        size = cells * sum(self._channel_sizes) if self.one_hot else int(np.prod(shape))
        size += NUM_DIRECTIONS if self.direction else 0
        self.observation_space = gym.spaces.Box(0.0, 1.0 if self.one_hot else 10.0, (size,), np.float32)
        if num_actions is not None:
            if not 1 <= int(num_actions) <= self.env.action_space.n:
                raise ValueError(f"env_config.num_actions must be in [1, {self.env.action_space.n}] for {env_id}, "
                                 f"got {num_actions!r}")
            self.action_space = gym.spaces.Discrete(int(num_actions))

    def _view(self, obs: Any) -> np.ndarray:
        image = np.asarray(obs["image"]).reshape(-1, len(self._channel_sizes))
        if self.one_hot:
            parts = [np.eye(n, dtype=np.float32)[image[:, i]] for i, n in enumerate(self._channel_sizes)]
            view = np.concatenate(parts, axis=1).reshape(-1)
        else:
            view = image.astype(np.float32).reshape(-1)
        if self.direction:
            view = np.concatenate([view, np.eye(NUM_DIRECTIONS, dtype=np.float32)[int(obs["direction"])]])
        return view

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._view(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._view(obs), float(reward), terminated, truncated, info
