from rlfleet.algorithms.a3c.a3c import ALGO_KEYS, DEFAULT_CONFIG, A3CTrainer, sample_and_compute_gradients
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "A3CTrainer", "sample_and_compute_gradients"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
A3CConfig = config_class("A3C")
__all__ += ["A3CConfig"]
