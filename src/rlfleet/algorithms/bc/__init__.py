from rlfleet.algorithms.bc.bc import ALGO_KEYS, DEFAULT_CONFIG, BCTrainer

__all__ = ["ALGO_KEYS", "BCTrainer", "DEFAULT_CONFIG"]
