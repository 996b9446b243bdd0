"""`input: "minari:<dataset id>"`: episodes of a locally installed Minari dataset as batches.

Minari (`pip install 'rlfleet[minari]'`) keeps datasets under `$MINARI_DATASETS_PATH`
(default `~/.minari/datasets`); rlfleet reads them, it never downloads one. An episode of
T steps holds T+1 observations; it becomes T rows (`obs` = observations[:-1], `new_obs` =
observations[1:]) with its own `eps_id`, `t`, `terminateds` and `truncateds`. Each
`next()` returns whole episodes totalling at least `rollout_fragment_length *
num_envs_per_worker` rows, episodes visited in a seeded order, forever.
"""
from __future__ import annotations

from typing import Iterator, List, Optional

import gymnasium as gym
import numpy as np

from rlfleet.offline.io_context import IOContext
from rlfleet.offline.json_format import OfflineDataError
from rlfleet.offline.batch_checks import prepare_batch
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.seeding import derive_seed

SB = SampleBatch


def _load(dataset_id: str):
    try:
        import minari
    except ImportError:
        raise ValueError(f"'input': 'minari:{dataset_id}' needs Minari: pip install 'rlfleet[minari]'") from None
    try:
        return minari.load_dataset(dataset_id)
    except Exception as e:  # Minari raises several types for a missing or damaged dataset
        raise OfflineDataError(f"minari:{dataset_id}", None,
                               f"cannot be loaded ({type(e).__name__}: {e}); list the local datasets with "
                               "`minari list local` (rlfleet never downloads one)") from None


def _spaces_fit(dataset_space: gym.Space, env_space: Optional[gym.Space]) -> bool:
    if env_space is None:
        return True
    if type(dataset_space) is not type(env_space):
        return False
    if isinstance(env_space, gym.spaces.Discrete):
        return dataset_space.n == env_space.n
    return getattr(dataset_space, "shape", None) == getattr(env_space, "shape", None)


class MinariReader:
    """Reads a Minari dataset episode by episode (see the module docstring).

    Args:
        dataset_id: e.g. "cartpole/expert-v0".
        ioctx: the worker's IOContext; the dataset's spaces must fit the worker's env /
            policy spaces (else OfflineDataError naming both).
    """

    def __init__(self, dataset_id: str, ioctx: Optional[IOContext] = None):
        self.ioctx = ioctx or IOContext()
        self.dataset_id = dataset_id
        self.source = f"minari:{dataset_id}"
        self.dataset = _load(dataset_id)
        self._check_spaces()
        config = self.ioctx.config
        self.min_rows = int(config.get("rollout_fragment_length", 1)) * int(config.get("num_envs_per_worker", 1))
        seed = config.get("seed")
        self._rng = np.random.default_rng(
            None if seed is None else derive_seed(seed, self.ioctx.worker_index, "minari_reader"))
        self._episodes: Optional[Iterator] = None
        self._next_eps_id = (self.ioctx.worker_index << 40) + 1

    def _check_spaces(self) -> None:
        worker = self.ioctx.worker
        env_obs, env_act = worker.env_spaces() if worker is not None else (None, None)
        policy = worker.get_policy() if worker is not None else None
        if env_act is None and policy is not None:
            env_act = policy.action_space
        for name, theirs, ours in (("observation", self.dataset.observation_space, env_obs),
                                   ("action", self.dataset.action_space, env_act)):
            if not _spaces_fit(theirs, ours):
                raise OfflineDataError(self.source, None, f"its {name} space {theirs} does not fit the env's {ours}")

    def _episode_stream(self) -> Iterator:
        ids = list(self.dataset.episode_indices)
        if not ids:
            raise OfflineDataError(self.source, None, "holds no episodes")
        while True:
            order = [ids[int(k)] for k in self._rng.permutation(len(ids))]
            yield from self.dataset.iterate_episodes(order)

    def _episode_batch(self, episode) -> SampleBatch:
        obs = np.asarray(episode.observations)
        if obs.dtype == np.float64:
            obs = obs.astype(np.float32)
        n = len(episode.rewards)
        terminateds = np.asarray(episode.terminations, bool)
        truncateds = np.asarray(episode.truncations, bool)
        eps_id, self._next_eps_id = self._next_eps_id, self._next_eps_id + 1
        return SampleBatch({
            SB.OBS: obs[:-1], SB.NEXT_OBS: obs[1:], SB.ACTIONS: np.asarray(episode.actions),
            SB.REWARDS: np.asarray(episode.rewards, np.float32), SB.TERMINATEDS: terminateds,
            SB.TRUNCATEDS: truncateds & ~terminateds, SB.DONES: terminateds | truncateds,
            SB.EPS_ID: np.full(n, eps_id, np.int64), SB.T: np.arange(n, dtype=np.int64),
        })

    def next(self) -> SampleBatch:
        if self._episodes is None:
            self._episodes = self._episode_stream()
        parts: List[SampleBatch] = []
        rows = 0
        while rows < self.min_rows or not parts:
            part = self._episode_batch(next(self._episodes))
            parts.append(part)
            rows += part.count
        return prepare_batch(SampleBatch.concat_samples(parts), None, self.ioctx, self.source, None)
