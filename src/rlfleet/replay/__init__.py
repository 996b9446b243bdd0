"""Replay: ring and prioritized buffers, segment trees, n-step transitions."""
from rlfleet.replay.buffers import BATCH_INDEXES, PRIO_WEIGHTS, PrioritizedReplayBuffer, ReplayBuffer
from rlfleet.replay.n_step import N_STEPS, TRANSITION_COLUMNS, n_step_transitions
from rlfleet.replay.segment_tree import MinTree, SegmentTree, SumTree

__all__ = [
    "BATCH_INDEXES", "PRIO_WEIGHTS", "N_STEPS", "TRANSITION_COLUMNS", "MinTree", "PrioritizedReplayBuffer",
    "ReplayBuffer", "SegmentTree", "SumTree", "n_step_transitions",
]
