from rlfleet.algorithms.appo.appo import ALGO_KEYS, DEFAULT_CONFIG, APPOTrainer
from rlfleet.algorithms.appo.appo_policy import APPOTorchPolicy, appo_surrogate_loss
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "APPOTrainer", "APPOTorchPolicy", "appo_surrogate_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
APPOConfig = config_class("APPO")
__all__ += ["APPOConfig"]
