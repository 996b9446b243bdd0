"""Small offline datasets the offline learners' tests train on, written here (never downloaded):
CartPole episodes of a scripted controller mixed with random ones, as a Minari dataset."""
from __future__ import annotations

from typing import Tuple

import gymnasium as gym
import numpy as np


def balance(obs) -> int:
    """A decent CartPole controller: push towards the pole's lean (angle + angular velocity)."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def write_cartpole_minari(dataset_id: str, episodes: int = 20, expert_fraction: float = 0.5, seed: int = 0
                          ) -> Tuple[float, float]:
    """Writes a Minari dataset `dataset_id` (under `$MINARI_DATASETS_PATH`) of CartPole-v1
    episodes: the first `expert_fraction` of them by `balance`, the rest uniformly random.

    Returns:
        The mean return of the scripted and of the random episodes.
    """
    import minari
    from minari.data_collector import EpisodeBuffer

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    n_expert = int(round(episodes * expert_fraction))
    buffers, returns = [], {True: [], False: []}
    for k in range(episodes):
        expert = k < n_expert
        o, _ = env.reset(seed=seed * 1000 + k)
        obs, acts, rews, terms, truncs = [o], [], [], [], []
        done = False
        while not done:
            a = balance(o) if expert else int(rng.integers(2))
            o, r, t, tr, _ = env.step(a)
            obs.append(o), acts.append(a), rews.append(r), terms.append(t), truncs.append(tr)
            done = t or tr
        returns[expert].append(sum(rews))
        buffers.append(EpisodeBuffer(id=k, observations=obs, actions=acts, rewards=rews, terminations=terms,
                                     truncations=truncs))
    minari.create_dataset_from_buffers(dataset_id, buffers, env=env, algorithm_name="scripted+random")
    return float(np.mean(returns[True])), float(np.mean(returns[False]))


def dataset_rows(path: str):
    """Every row of the JSON dataset at `path` (its lines in file order), one SampleBatch."""
    from rlfleet.offline.readers import JsonReader, expand_files
    from rlfleet.policy.sample_batch import SampleBatch

    lines = sum(1 for f in expand_files(path) for line in open(f, encoding="utf-8") if line.strip())
    reader = JsonReader(path)
    return SampleBatch.concat_samples([reader.next() for _ in range(lines)])


def minari_cartpole_source(tmp_path, monkeypatch, seed: int) -> Tuple[str, Tuple[float, float]]:
    """`write_cartpole_minari` of 16 episodes into a Minari folder under `tmp_path` (skips the
    test without minari); returns the `input` that reads it and the two mean returns."""
    import pytest

    pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    returns = write_cartpole_minari("cartpole/mixed-v0", episodes=16, seed=seed)
    return "minari:cartpole/mixed-v0", returns


class TargetActionEnv(gym.Env):
    """One-step episodes: observe s ~ U(-1, 1)^2, act a in [-1, 1], reward -(a - target(s))^2
    with target(s) = 0.8 * s[0] (the best action; its Q is known without bootstrapping)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, env_config=None):
        self._obs = np.zeros(2, np.float32)

    @staticmethod
    def target(obs: np.ndarray) -> np.ndarray:
        return 0.8 * np.asarray(obs)[..., :1]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._obs = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self._obs, {}

    def step(self, action):
        reward = -float(((np.asarray(action) - self.target(self._obs)) ** 2).sum())
        return self._obs, reward, True, False, {}


def write_target_action_dataset(path: str, rows: int = 2000, seed: int = 0) -> None:
    """`rows` one-step episodes of `TargetActionEnv` into the folder `path` (one JSON line per
    100 rows): half act with the best action, half uniformly at random."""
    from rlfleet.offline.writer import JsonWriter
    from rlfleet.policy.sample_batch import SampleBatch

    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1.0, 1.0, (rows, 2)).astype(np.float32)
    best = rng.random(rows) < 0.5
    actions = np.where(best[:, None], TargetActionEnv.target(obs), rng.uniform(-1.0, 1.0, (rows, 1)))
    actions = actions.astype(np.float32)
    rewards = -((actions - TargetActionEnv.target(obs)) ** 2).sum(-1).astype(np.float32)
    writer = JsonWriter(path, actions_normalized=True)
    try:
        for start in range(0, rows, 100):
            part = slice(start, start + 100)
            n = len(rewards[part])
            writer.write(SampleBatch({
                SampleBatch.OBS: obs[part], SampleBatch.NEXT_OBS: obs[part], SampleBatch.ACTIONS: actions[part],
                SampleBatch.REWARDS: rewards[part], SampleBatch.TERMINATEDS: np.ones(n, bool),
                SampleBatch.TRUNCATEDS: np.zeros(n, bool), SampleBatch.EPS_ID: np.arange(start, start + n),
                SampleBatch.T: np.zeros(n, np.int64)}))
    finally:
        writer.close()
