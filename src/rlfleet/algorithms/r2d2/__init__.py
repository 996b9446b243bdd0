from rlfleet.algorithms.r2d2.apex_r2d2 import DEFAULT_CONFIG as APEX_R2D2_DEFAULT_CONFIG
from rlfleet.algorithms.r2d2.apex_r2d2 import ApexR2D2Trainer
from rlfleet.algorithms.r2d2.r2d2 import DEFAULT_CONFIG, R2D2Trainer
from rlfleet.algorithms.r2d2.r2d2_policy import R2D2TorchPolicy, h_function, h_inverse, r2d2_loss

__all__ = ["APEX_R2D2_DEFAULT_CONFIG", "ApexR2D2Trainer", "DEFAULT_CONFIG", "R2D2Trainer", "R2D2TorchPolicy",
           "h_function", "h_inverse", "r2d2_loss"]
