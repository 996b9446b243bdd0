from rlfleet.algorithms.r2d2.r2d2 import DEFAULT_CONFIG, R2D2Trainer
from rlfleet.algorithms.r2d2.r2d2_policy import R2D2TorchPolicy, h_function, h_inverse, r2d2_loss

__all__ = ["DEFAULT_CONFIG", "R2D2Trainer", "R2D2TorchPolicy", "h_function", "h_inverse", "r2d2_loss"]
