from rlfleet.algorithms.rnnsac.rnnsac import DEFAULT_CONFIG, RNNSACTrainer
from rlfleet.algorithms.rnnsac.rnnsac_policy import RNNSACTorchPolicy, rnnsac_losses

__all__ = ["DEFAULT_CONFIG", "RNNSACTrainer", "RNNSACTorchPolicy", "rnnsac_losses"]
