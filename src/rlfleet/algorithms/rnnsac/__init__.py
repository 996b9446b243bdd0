from rlfleet.algorithms.rnnsac.rnnsac import DEFAULT_CONFIG, RNNSACTrainer
from rlfleet.algorithms.rnnsac.rnnsac_policy import RNNSACTorchPolicy, rnnsac_losses
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "RNNSACTrainer", "RNNSACTorchPolicy", "rnnsac_losses"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
RNNSACConfig = config_class("RNNSAC")
__all__ += ["RNNSACConfig"]
