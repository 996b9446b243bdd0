from rlfleet.algorithms.r2d2.apex_r2d2 import DEFAULT_CONFIG as APEX_R2D2_DEFAULT_CONFIG
from rlfleet.algorithms.r2d2.apex_r2d2 import ApexR2D2Trainer
from rlfleet.algorithms.r2d2.r2d2 import DEFAULT_CONFIG, R2D2Trainer
from rlfleet.algorithms.r2d2.r2d2_policy import R2D2TorchPolicy, h_function, h_inverse, r2d2_loss
from rlfleet.config.builder import config_class

__all__ = ["APEX_R2D2_DEFAULT_CONFIG", "ApexR2D2Trainer", "DEFAULT_CONFIG", "R2D2Trainer", "R2D2TorchPolicy",
           "h_function", "h_inverse", "r2d2_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
ApexR2D2Config = config_class("APEX_R2D2")
R2D2Config = config_class("R2D2")
__all__ += ["ApexR2D2Config", "R2D2Config"]
