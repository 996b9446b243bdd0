"""The mixed-quality Pendulum-v1 offline dataset the offline learners are compared on.

Episodes of the scripted expert (`rlfleet.env.examples.pendulum_expert`) mixed with episodes
of uniformly random torques, written as JSON lines that `input: <folder>` reads.
"""
from __future__ import annotations

from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.examples.pendulum_expert import MAX_TORQUE, expert_torque
from rlfleet.offline.mixed_dataset import write_mixed_dataset
from rlfleet.policy.sample_batch import SampleBatch


def _episode(env: gym.Env, seed: int, eps_id: int, expert: bool, rng: np.random.Generator) -> SampleBatch:
    obs, _ = env.reset(seed=seed)
    rows: Dict[str, list] = {k: [] for k in ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds")}
    done = False
    while not done:
        torque = expert_torque(obs) if expert else float(rng.uniform(-MAX_TORQUE, MAX_TORQUE))
        new_obs, reward, terminated, truncated, _ = env.step(np.array([torque], np.float32))
        for key, value in zip(rows, (obs, new_obs, [torque / MAX_TORQUE], reward, terminated, truncated)):
            rows[key].append(value)
        obs, done = new_obs, terminated or truncated
    n = len(rows["rewards"])
    return SampleBatch({
        SampleBatch.OBS: np.asarray(rows["obs"], np.float32),
        SampleBatch.NEXT_OBS: np.asarray(rows["new_obs"], np.float32),
        SampleBatch.ACTIONS: np.asarray(rows["actions"], np.float32),  # normalized to [-1, 1]
        SampleBatch.REWARDS: np.asarray(rows["rewards"], np.float32),
        SampleBatch.TERMINATEDS: np.asarray(rows["terminateds"], bool),
        SampleBatch.TRUNCATEDS: np.asarray(rows["truncateds"], bool),
        SampleBatch.EPS_ID: np.full(n, eps_id, np.int64),
        SampleBatch.T: np.arange(n, dtype=np.int64),
    })


def write_mixed_pendulum_dataset(path: str, episodes: int = 100, expert_fraction: float = 0.5,
                                 seed: int = 0, max_episode_steps: Optional[int] = None) -> Dict[str, float]:
    """Writes `episodes` Pendulum-v1 episodes into the folder `path`, one JSON line each:
    the first `round(episodes * expert_fraction)` from the scripted expert, the rest random.

    Actions are written normalized to [-1, 1] (the line records it), as rlfleet's continuous
    policies write them. Returns the mean return of each part (`expert_return`,
    `random_return`) and the files' folder (`path`).
    """
    return write_mixed_dataset(path, "Pendulum-v1", _episode, episodes, expert_fraction, seed, max_episode_steps,
                               actions_normalized=True)
