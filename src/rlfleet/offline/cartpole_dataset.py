"""A mixed-quality CartPole-v1 offline dataset: episodes of the scripted controller
(rlfleet/env/examples/cartpole_expert.py) and of uniformly random pushes, written as rlfleet's
JSON lines (one episode per line), for offline learners' tests and tuned examples.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.examples.cartpole_expert import expert_push
from rlfleet.offline.writer import JsonWriter
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


def write_mixed_cartpole_dataset(path: str, episodes: int = 30, expert_fraction: float = 0.5, seed: int = 0,
                                 max_episode_steps: Optional[int] = 100) -> Dict[str, float]:
    """Writes `episodes` CartPole-v1 episodes into the folder `path`, one JSON line each: the
    first `round(episodes * expert_fraction)` from the controller, the rest random.

    Returns the mean return of each part (`expert_return`, `random_return`) and the folder.
    """
    if not 0.0 <= expert_fraction <= 1.0:
        raise ValueError(f"expert_fraction must lie in [0, 1], got {expert_fraction}")
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": int(max_episode_steps)}
    env = gym.make("CartPole-v1", **kwargs)
    rng = np.random.default_rng(seed)
    n_expert = int(round(episodes * expert_fraction))
    writer = JsonWriter(path)
    returns: Dict[bool, list] = {True: [], False: []}
    try:
        for i in range(int(episodes)):
            expert = i < n_expert
            obs, _ = env.reset(seed=seed * 100_003 + i)
            rows: Dict[str, list] = {k: [] for k in ("obs", "actions", "rewards", "terminateds", "truncateds")}
            done = False
            while not done:
                action = expert_push(obs) if expert else int(rng.integers(2))
                new_obs, reward, terminated, truncated, _ = env.step(action)
                for key, value in zip(rows, (obs, action, reward, terminated, truncated)):
                    rows[key].append(value)
                obs, done = new_obs, terminated or truncated
            n = len(rows["rewards"])
            returns[expert].append(float(np.sum(rows["rewards"])))
            writer.write(SampleBatch({
                SB.OBS: np.asarray(rows["obs"], np.float32), SB.ACTIONS: np.asarray(rows["actions"], np.int64),
                SB.REWARDS: np.asarray(rows["rewards"], np.float32), SB.TERMINATEDS: np.asarray(rows["terminateds"]),
                SB.TRUNCATEDS: np.asarray(rows["truncateds"]), SB.EPS_ID: np.full(n, i, np.int64),
                SB.T: np.arange(n, dtype=np.int64)}))
    finally:
        writer.close()
        env.close()
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731
    return {"expert_return": mean(returns[True]), "random_return": mean(returns[False]),
            "path": os.path.abspath(path)}
