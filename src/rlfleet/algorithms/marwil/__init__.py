from rlfleet.algorithms.marwil.marwil import ALGO_KEYS, DEFAULT_CONFIG, MARWILTrainer
from rlfleet.algorithms.marwil.marwil_policy import MARWILTorchPolicy, marwil_loss
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "MARWILTorchPolicy", "MARWILTrainer", "marwil_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
MARWILConfig = config_class("MARWIL")
__all__ += ["MARWILConfig"]
