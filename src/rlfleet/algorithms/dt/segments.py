"""Offline episodes cut into Decision Transformer training segments.

Chen et al. 2021 (arXiv:2106.01345, section 3) train on windows of `K` consecutive steps of
an episode, each step a (return-to-go, observation, action) triple with its timestep, where
the return-to-go is the undiscounted sum of the episode's rewards from that step on.

- `EpisodeAssembler` gathers the rows of each episode (`eps_id`) across the batches an input
  reader returns (files written by `output` may cut an episode into several lines; the env
  sampler cuts fragments) and releases an episode once its last row is terminated or
  truncated: return-to-go needs the whole episode.
- `SegmentBuffer` holds up to `capacity` episodes (a random one is replaced when full) and
  samples segments: an end step uniformly over all steps held, the `K` steps up to it, the
  front padded with zeros where the episode started less than `K` steps before. Segments
  ending early in an episode are then short, as the policy's context is at an episode's
  start (context.py).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch

# Segment columns (the train batch `DTTorchPolicy.learn_on_batch` receives), each `[B, K, ...]`.
RETURNS_TO_GO = "returns_to_go"
TIMESTEPS = "timesteps"
ATTENTION_MASK = "attention_mask"


def returns_to_go(rewards: np.ndarray) -> np.ndarray:
    """`R_t = r_t + r_{t+1} + ... + r_{T-1}` (undiscounted, as in the paper) for one episode."""
    rewards = np.asarray(rewards, np.float64)
    return np.cumsum(rewards[::-1])[::-1].astype(np.float32)


class EpisodeAssembler:
    """Rows of unfinished episodes, by `eps_id`, until their end arrives.

    Args:
        max_pending: most unfinished episodes kept; the oldest is dropped beyond it (data
            whose episodes never end would otherwise grow without bound).
    """

    def __init__(self, max_pending: int = 1000):
        self.max_pending = int(max_pending)
        self._pending: "OrderedDict[int, List[SampleBatch]]" = OrderedDict()
        self.dropped = 0

    def add(self, batch: SampleBatch) -> List[SampleBatch]:
        """Adds `batch`'s rows; returns the episodes it completed (rows in order)."""
        if batch.count == 0:
            return []
        if SB.EPS_ID not in batch:
            raise ValueError("Decision Transformer needs episode ids ('eps_id') in its input to compute "
                             "returns-to-go; record the data with rlfleet's `output` or read a Minari dataset")
        if SB.TERMINATEDS not in batch and SB.TRUNCATEDS not in batch:
            raise ValueError("Decision Transformer needs to know where episodes end ('terminateds' / 'truncateds' "
                             "columns) to compute returns-to-go; the input batch has neither")
        eps = np.asarray(batch[SB.EPS_ID])
        ends = np.zeros(batch.count, bool)
        for key in (SB.TERMINATEDS, SB.TRUNCATEDS):
            if key in batch:
                ends |= np.asarray(batch[key], bool)
        done: List[SampleBatch] = []
        cuts = np.flatnonzero((eps[1:] != eps[:-1]) | ends[:-1]) + 1
        for start, stop in zip(np.r_[0, cuts], np.r_[cuts, batch.count]):
            eid = int(eps[start])
            self._pending.setdefault(eid, []).append(batch.slice(int(start), int(stop)))
            if ends[stop - 1]:
                done.append(SampleBatch.concat_samples(self._pending.pop(eid)))
        while len(self._pending) > self.max_pending:
            self._pending.popitem(last=False)
            self.dropped += 1
        return done


class SegmentBuffer:
    """Whole episodes (obs, actions, returns-to-go, timesteps) and segment sampling.

    Args:
        capacity: episodes held; when full, a new one replaces a random one.
        context_length: `K`, the steps of each segment.
        max_ep_len: timesteps are clipped to `max_ep_len - 1` (the embedding's last row).
        rng: the NumPy generator segments (and replacements) are drawn from.
    """

    def __init__(self, capacity: int, context_length: int, max_ep_len: int, rng: np.random.Generator):
        self.capacity = int(capacity)
        self.k = int(context_length)
        self.max_ep_len = int(max_ep_len)
        self.rng = rng
        self.episodes: List[Dict[str, np.ndarray]] = []

    def __len__(self) -> int:
        return len(self.episodes)

    def add(self, episode: SampleBatch) -> None:
        """Adds one whole episode (its rows in order)."""
        n = episode.count
        t = np.asarray(episode[SB.T], np.int64) if SB.T in episode else np.arange(n)
        item = {
            SB.OBS: np.asarray(episode[SB.OBS], np.float32).reshape(n, -1),
            SB.ACTIONS: np.asarray(episode[SB.ACTIONS]),
            RETURNS_TO_GO: returns_to_go(episode[SB.REWARDS]),
            TIMESTEPS: np.clip(t, 0, self.max_ep_len - 1),
        }
        if len(self.episodes) < self.capacity:
            self.episodes.append(item)
        else:
            self.episodes[int(self.rng.integers(len(self.episodes)))] = item

    def sample(self, num_segments: int) -> SampleBatch:
        """`num_segments` segments as `[B, K, ...]` columns: obs, actions, returns_to_go,
        timesteps and attention_mask (1 for real steps, 0 for the front padding)."""
        if not self.episodes:
            raise ValueError("the segment buffer is empty: no whole episode has been read yet")
        lengths = np.array([len(e[RETURNS_TO_GO]) for e in self.episodes])
        # An end step uniformly over all steps held: episodes weigh by their length.
        flat = self.rng.integers(int(lengths.sum()), size=int(num_segments))
        offsets = np.cumsum(lengths)
        which = np.searchsorted(offsets, flat, side="right")
        ends = flat - (offsets[which] - lengths[which])
        first = self.episodes[0]
        k = self.k
        out = {key: np.zeros((num_segments, k, *first[key].shape[1:]), first[key].dtype) for key in first}
        mask = np.zeros((num_segments, k), np.float32)
        for row, (e, end) in enumerate(zip(which, ends)):
            start = max(0, int(end) - k + 1)
            size = int(end) + 1 - start
            for key, column in self.episodes[e].items():
                out[key][row, k - size:] = column[start:end + 1]
            mask[row, k - size:] = 1.0
        out[ATTENTION_MASK] = mask
        return SampleBatch(out)
