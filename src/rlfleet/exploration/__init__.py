"""Explorations: how a policy turns its action distribution into actions. Every one
subclasses `Exploration` (exploration/base.py), which declares each hook with a default."""
from rlfleet.exploration.base import Exploration

__all__ = ["Exploration"]
