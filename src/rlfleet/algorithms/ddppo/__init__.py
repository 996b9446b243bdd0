from rlfleet.algorithms.ddppo.ddppo import ALGO_KEYS, DEFAULT_CONFIG, DDPPOTrainer
from rlfleet.algorithms.ddppo.ddppo_policy import DDPPOTorchPolicy
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "DDPPOTrainer", "DDPPOTorchPolicy"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
DDPPOConfig = config_class("DDPPO")
__all__ += ["DDPPOConfig"]
