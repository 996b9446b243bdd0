"""Writing a mixed-quality offline dataset: the first part of the episodes from a scripted
expert, the rest random, one JSON line per episode (`input: <folder>` reads them). The
Pendulum and CartPole datasets (pendulum_dataset.py, cartpole_dataset.py) supply the episode.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.offline.writer import JsonWriter
from rlfleet.policy.sample_batch import SampleBatch

# `(env, reset seed, episode id, expert?, rng) -> the episode's rows`
EpisodeFn = Callable[[gym.Env, int, int, bool, np.random.Generator], SampleBatch]


def write_mixed_dataset(path: str, env_id: str, episode: EpisodeFn, episodes: int, expert_fraction: float,
                        seed: int, max_episode_steps: Optional[int] = None,
                        actions_normalized: bool = False) -> Dict[str, float]:
    """Writes `episodes` episodes of `env_id` into the folder `path`: the first
    `round(episodes * expert_fraction)` with `expert=True`. Returns the mean return of each
    part (`expert_return`, `random_return`) and the folder (`path`)."""
    if not 0.0 <= expert_fraction <= 1.0:
        raise ValueError(f"expert_fraction must lie in [0, 1], got {expert_fraction}")
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": int(max_episode_steps)}
    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(seed)
    n_expert = int(round(episodes * expert_fraction))
    writer = JsonWriter(path, actions_normalized=actions_normalized)
    returns: Dict[bool, list] = {True: [], False: []}
    try:
        for i in range(int(episodes)):
            expert = i < n_expert
            batch = episode(env, seed * 100_003 + i, i, expert, rng)
            returns[expert].append(float(batch[SampleBatch.REWARDS].sum()))
            writer.write(batch)
    finally:
        writer.close()
        env.close()
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731
    return {"expert_return": mean(returns[True]), "random_return": mean(returns[False]),
            "path": os.path.abspath(path)}
