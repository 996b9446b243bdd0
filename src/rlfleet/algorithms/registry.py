"""Kept so existing imports work: the registry lives in ``rlfleet.registry``."""
from rlfleet.registry import _ALGORITHMS, get_trainer_class, list_algorithms

__all__ = ["_ALGORITHMS", "get_trainer_class", "list_algorithms"]
