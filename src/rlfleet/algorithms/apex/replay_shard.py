"""Ape-X's replay side: the shards (one prioritized buffer per trained policy each) and
what a rollout worker does to a fragment before it goes to a shard.

A shard is a plain class: the trainer runs it in-process (`num_workers: 0`) or as a Ray
actor started by `WorkerSet.start_actors` (with remote workers); the code is the same.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import BATCH_INDEXES, PRIO_WEIGHTS, PrioritizedReplayBuffer, ReplayBuffer, n_step_transitions
from rlfleet.utils.seeding import derive_seed

# {policy_id: (items to store, e.g. n-step transitions, initial priorities or None)}
ShardItems = Dict[str, Tuple[SampleBatch, Optional[np.ndarray]]]


def td_errors(policy: Any, transitions: SampleBatch) -> np.ndarray:
    """The policy's TD error on each stored item (a transition, or a sequence's priority mix)
    without learning (Ape-X's initial priorities: the loss evaluated under `torch.no_grad()`
    with unit importance weights)."""
    batch = transitions.copy()
    batch[PRIO_WEIGHTS] = np.ones(batch.count, dtype=np.float32)
    with torch.no_grad():
        _, stats = policy.loss(policy.model, policy.dist_class, policy.to_tensors(batch))
    return np.nan_to_num(stats["td_error"].detach().cpu().numpy().reshape(-1), nan=0.0, posinf=0.0, neginf=0.0)


def worker_side_items(worker: Any, batch: Any, make_items: Callable[[Any, SampleBatch], SampleBatch]) -> ShardItems:
    """Runs on the rollout worker that sampled `batch`: each trained policy's rows become what
    its shard stores, `make_items(policy, rows)`, with, under `worker_side_prioritization`,
    their initial priorities |TD error| + `prioritized_replay_eps` (else None: the shard gives
    them its highest priority so far)."""
    multi = batch.as_multi_agent()
    out: ShardItems = {}
    for pid in worker.policies_to_train:
        rows = multi.policy_batches.get(pid)
        if rows is None or rows.count == 0 or pid not in worker.policy_map:
            continue
        policy = worker.policy_map[pid]
        cfg = policy.config
        items = make_items(policy, rows)
        priorities = None
        if cfg.get("worker_side_prioritization") and cfg.get("prioritized_replay"):
            priorities = np.abs(td_errors(policy, items)) + cfg["prioritized_replay_eps"]
        out[pid] = (items, priorities)
    return out


def _n_step_items(policy: Any, rows: SampleBatch) -> SampleBatch:
    return n_step_transitions(rows, policy.config["n_step"], policy.config["gamma"])


def worker_side_transitions(worker: Any, batch: Any) -> ShardItems:
    """`worker_side_items` of Ape-X: n-step transitions (`n_step`, the policy's `gamma`)."""
    return worker_side_items(worker, batch, _n_step_items)


class ReplayShard:
    """One replay shard: a buffer of `capacity` transitions per trained policy, replaying
    once it holds `replay_starts` of them.

    Args:
        config: the trainer's config (`prioritized_replay`, `prioritized_replay_alpha`, `seed`).
        shard_index: this shard's index (seeds its buffers).
        capacity: transitions per policy buffer (`buffer_size // num_replay_buffer_shards`).
        replay_starts: transitions a buffer holds before it replays
            (`learning_starts // num_replay_buffer_shards`).
    """

    def __init__(self, config: dict, shard_index: int, capacity: int, replay_starts: int):
        self.prioritized = bool(config.get("prioritized_replay"))
        self.alpha = float(config.get("prioritized_replay_alpha", 0.6))
        self.seed, self.shard_index = config.get("seed"), int(shard_index)
        self.capacity, self.replay_starts = max(1, int(capacity)), int(replay_starts)
        self.buffers: Dict[str, ReplayBuffer] = {}
        self.num_priority_updates = 0

    def _buffer(self, pid: str) -> ReplayBuffer:
        buffer = self.buffers.get(pid)
        if buffer is None:
            seed = None if self.seed is None else derive_seed(self.seed, "replay_shard", self.shard_index, pid)
            buffer = (PrioritizedReplayBuffer(self.capacity, alpha=self.alpha, seed=seed) if self.prioritized
                      else ReplayBuffer(self.capacity, seed=seed))
            self.buffers[pid] = buffer
        return buffer

    def add(self, items: ShardItems) -> int:
        """Stores each policy's transitions (with their initial priorities, when given);
        returns the rows stored."""
        rows = 0
        for pid, (transitions, priorities) in items.items():
            buffer = self._buffer(pid)
            slots = buffer.add(transitions)
            if priorities is not None and self.prioritized and len(slots):
                buffer.update_priorities(slots, np.asarray(priorities)[-len(slots):])
            rows += transitions.count
        return rows

    def replay(self, batch_size: int, beta: float) -> Optional[Dict[str, SampleBatch]]:
        """`{policy_id: batch_size transitions}` of every buffer that holds `replay_starts`
        (None when none does yet)."""
        out = {pid: buffer.sample(int(batch_size), beta=beta) for pid, buffer in self.buffers.items()
               if len(buffer) >= max(1, self.replay_starts)}
        return out or None

    def update_priorities(self, updates: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> None:
        """Sets new priorities: `{policy_id: (batch_indexes, priorities)}`."""
        if not self.prioritized:
            return
        for pid, (idx, priorities) in updates.items():
            if pid in self.buffers:
                self.buffers[pid].update_priorities(idx, priorities)
                self.num_priority_updates += 1

    def priorities(self, pid: str) -> np.ndarray:
        """priority^alpha of each transition in `pid`'s buffer (empty when not prioritized)."""
        buffer = self.buffers.get(pid)
        return buffer.priorities() if isinstance(buffer, PrioritizedReplayBuffer) else np.zeros(0)

    def stats(self) -> Dict[str, Any]:
        """Sizes and counts: `{"num_priority_updates": n, policy_id: buffer stats, ...}`."""
        out: Dict[str, Any] = {"num_priority_updates": self.num_priority_updates}
        for pid, buffer in self.buffers.items():
            out[pid] = buffer.stats()
        return out


def learn_replayed(policy: Any, batch: SampleBatch, prioritized_replay_eps: float
                   ) -> Tuple[Dict[str, Any], Tuple[np.ndarray, np.ndarray]]:
    """One update of `policy` on a replayed batch; returns its info and the
    `(batch_indexes, new priorities)` to send back to the batch's shard."""
    info = policy.learn_on_batch(batch)
    td_error = info.pop("td_error")
    return info, (batch[BATCH_INDEXES], np.abs(td_error) + prioritized_replay_eps)
