"""A mixed-quality CartPole-v1 offline dataset: episodes of the scripted controller
(rlfleet/env/examples/cartpole_expert.py) and of uniformly random pushes, written as rlfleet's
JSON lines (one episode per line), for offline learners' tests and tuned examples.
"""
from __future__ import annotations

from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.examples.cartpole_expert import expert_push
from rlfleet.offline.mixed_dataset import write_mixed_dataset
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


def _episode(env: gym.Env, seed: int, eps_id: int, expert: bool, rng: np.random.Generator) -> SampleBatch:
    obs, _ = env.reset(seed=seed)
    rows: Dict[str, list] = {k: [] for k in ("obs", "actions", "rewards", "terminateds", "truncateds")}
    done = False
    while not done:
        action = expert_push(obs) if expert else int(rng.integers(2))
        new_obs, reward, terminated, truncated, _ = env.step(action)
        for key, value in zip(rows, (obs, action, reward, terminated, truncated)):
            rows[key].append(value)
        obs, done = new_obs, terminated or truncated
    n = len(rows["rewards"])
    return SampleBatch({
        SB.OBS: np.asarray(rows["obs"], np.float32), SB.ACTIONS: np.asarray(rows["actions"], np.int64),
        SB.REWARDS: np.asarray(rows["rewards"], np.float32), SB.TERMINATEDS: np.asarray(rows["terminateds"]),
        SB.TRUNCATEDS: np.asarray(rows["truncateds"]), SB.EPS_ID: np.full(n, eps_id, np.int64),
        SB.T: np.arange(n, dtype=np.int64)})


def write_mixed_cartpole_dataset(path: str, episodes: int = 30, expert_fraction: float = 0.5, seed: int = 0,
                                 max_episode_steps: Optional[int] = 100) -> Dict[str, float]:
    """Writes `episodes` CartPole-v1 episodes into the folder `path`, one JSON line each: the
    first `round(episodes * expert_fraction)` from the controller, the rest random.

    Returns the mean return of each part (`expert_return`, `random_return`) and the folder.
    """
    return write_mixed_dataset(path, "CartPole-v1", _episode, episodes, expert_fraction, seed, max_episode_steps)
