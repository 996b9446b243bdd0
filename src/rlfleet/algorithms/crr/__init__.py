from rlfleet.algorithms.crr.crr import ALGO_KEYS, DEFAULT_CONFIG, CRRTrainer
from rlfleet.algorithms.crr.crr_policy import CRRTorchPolicy, crr_losses
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "CRRTorchPolicy", "CRRTrainer", "DEFAULT_CONFIG", "crr_losses"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
CRRConfig = config_class("CRR")
__all__ += ["CRRConfig"]
