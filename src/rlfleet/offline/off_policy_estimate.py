"""The record an off-policy estimator makes of one episode.

Its own module because both sides use it: `offline.estimators` makes them, and
`rollout.metrics` summarizes them beside the finished episodes (rollout sits above offline).
"""
from __future__ import annotations

from typing import Dict, NamedTuple


class OffPolicyEstimate(NamedTuple):
    """One episode's off-policy estimate (rlfleet.offline.estimators), reported by a
    worker's `get_metrics()` beside its finished episodes."""

    estimator_name: str
    metrics: Dict[str, float]
