"""Ape-X: distributed prioritized experience replay (DQN)."""
from rlfleet.algorithms.apex.apex import DEFAULT_CONFIG, ApexTrainer

__all__ = ["ApexTrainer", "DEFAULT_CONFIG"]
