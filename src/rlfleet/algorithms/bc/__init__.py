from rlfleet.algorithms.bc.bc import ALGO_KEYS, DEFAULT_CONFIG, BCTrainer
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "BCTrainer", "DEFAULT_CONFIG"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
BCConfig = config_class("BC")
__all__ += ["BCConfig"]
