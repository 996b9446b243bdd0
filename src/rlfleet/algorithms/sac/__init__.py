from rlfleet.algorithms.sac.sac import DEFAULT_CONFIG, SACTrainer
from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy, sac_losses
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "SACTrainer", "SACTorchPolicy", "sac_losses"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
SACConfig = config_class("SAC")
__all__ += ["SACConfig"]
