"""The mixed-quality Pendulum-v1 offline dataset the offline learners are compared on.

Episodes of the scripted expert (`rlfleet.env.examples.pendulum_expert`) mixed with episodes
of uniformly random torques, written as JSON lines that `input: <folder>` reads.

The expert acts with Gaussian noise on its torque (`expert_noise`, 0.2 by default, a tenth of
the torque range), and the line records the torque it applied. Without noise the deterministic
expert holds the pendulum exactly upright, so its data shows nothing of the states a few
hundredths of a radian off the top, and a policy learned from it drifts off and falls there
(measured for return-conditioned learners: docs/benchmarks.md, "Decision Transformer"). The
noise costs the expert about 3 % of its return.
"""
from __future__ import annotations

import functools
from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.examples.pendulum_expert import MAX_TORQUE, expert_torque
from rlfleet.offline.mixed_dataset import write_mixed_dataset
from rlfleet.policy.sample_batch import SampleBatch

EXPERT_NOISE = 0.2  # std of the Gaussian noise on the expert's torque (the range is [-2, 2])


def _episode(env: gym.Env, seed: int, eps_id: int, expert: bool, rng: np.random.Generator,
             expert_noise: float = EXPERT_NOISE) -> SampleBatch:
    obs, _ = env.reset(seed=seed)
    rows: Dict[str, list] = {k: [] for k in ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds")}
    done = False
    while not done:
        if expert:
            noise = expert_noise * rng.standard_normal() if expert_noise else 0.0
            torque = float(np.clip(expert_torque(obs) + noise, -MAX_TORQUE, MAX_TORQUE))
        else:
            torque = float(rng.uniform(-MAX_TORQUE, MAX_TORQUE))
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
                                 seed: int = 0, max_episode_steps: Optional[int] = None,
                                 expert_noise: float = EXPERT_NOISE) -> Dict[str, float]:
    """Writes `episodes` Pendulum-v1 episodes into the folder `path`, one JSON line each:
    the first `round(episodes * expert_fraction)` from the scripted expert (Gaussian noise of
    std `expert_noise` on its torque; 0: the noise-free controller), the rest random.

    Actions are written normalized to [-1, 1] (the line records it), as rlfleet's continuous
    policies write them. Returns the mean return of each part (`expert_return`,
    `random_return`) and the files' folder (`path`).
    """
    if not expert_noise >= 0.0:
        raise ValueError(f"expert_noise must be >= 0 (the std of the noise on the expert's torque), got {expert_noise}")
    episode = functools.partial(_episode, expert_noise=float(expert_noise))
    return write_mixed_dataset(path, "Pendulum-v1", episode, episodes, expert_fraction, seed, max_episode_steps,
                               actions_normalized=True)
