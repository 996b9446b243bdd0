"""Augmented random search (ARS)."""
from rlfleet.algorithms.ars.ars import DEFAULT_CONFIG, ARSTrainer

__all__ = ["ARSTrainer", "DEFAULT_CONFIG"]
