"""A scripted Pendulum-v1 expert and the mixed-quality offline dataset written with it.

Offline learners are compared on data of known quality: episodes of this controller (the
"expert") mixed with episodes of uniformly random torques. The controller needs no training,
so the dataset is the same on every machine and costs seconds to write.

Pendulum-v1's dynamics (Gymnasium's source): theta'' = 3 g / (2 l) sin(theta) + 3 / (m l^2) u
with g = 10, m = l = 1, so theta'' = 15 sin(theta) + 3 u, theta = 0 upright. Far from the top
the controller pumps energy (torque along the swing while the energy
E = theta'^2 / 2 + 15 (cos(theta) - 1) is below the upright's 0); near the top a PD law holds
it. Returns over 20 seeded episodes: mean about -137 (worst about -330); random torques
average about -1200.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.offline.writer import JsonWriter
from rlfleet.policy.sample_batch import SampleBatch

MAX_TORQUE = 2.0


def expert_torque(obs: np.ndarray) -> float:
    """The scripted controller's torque for one Pendulum-v1 observation (cos, sin, velocity)."""
    cos, sin, velocity = (float(x) for x in obs)
    if cos > 0.8:  # near the top: a PD law on the angle
        return float(np.clip(-(12.0 * np.arctan2(sin, cos) + 2.5 * velocity), -MAX_TORQUE, MAX_TORQUE))
    energy = 0.5 * velocity * velocity + 15.0 * (cos - 1.0)
    if abs(velocity) < 1e-3:  # at rest below the top: any push starts the swing
        return MAX_TORQUE
    return MAX_TORQUE * float(np.sign(-velocity * energy))


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
    if not 0.0 <= expert_fraction <= 1.0:
        raise ValueError(f"expert_fraction must lie in [0, 1], got {expert_fraction}")
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": int(max_episode_steps)}
    env = gym.make("Pendulum-v1", **kwargs)
    rng = np.random.default_rng(seed)
    n_expert = int(round(episodes * expert_fraction))
    writer = JsonWriter(path, actions_normalized=True)
    returns: Dict[bool, list] = {True: [], False: []}
    try:
        for i in range(int(episodes)):
            expert = i < n_expert
            batch = _episode(env, seed * 100_003 + i, i, expert, rng)
            returns[expert].append(float(batch[SampleBatch.REWARDS].sum()))
            writer.write(batch)
    finally:
        writer.close()
        env.close()
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731
    return {"expert_return": mean(returns[True]), "random_return": mean(returns[False]),
            "path": os.path.abspath(path)}
