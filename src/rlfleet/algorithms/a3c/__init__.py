from rlfleet.algorithms.a3c.a3c import ALGO_KEYS, DEFAULT_CONFIG, A3CTrainer, sample_and_compute_gradients

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "A3CTrainer", "sample_and_compute_gradients"]
