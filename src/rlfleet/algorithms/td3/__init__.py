from rlfleet.algorithms.td3.td3 import DEFAULT_CONFIG, TD3Trainer
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "TD3Trainer"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
TD3Config = config_class("TD3")
__all__ += ["TD3Config"]
