from rlfleet.algorithms.sac.sac import DEFAULT_CONFIG, SACTrainer
from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy, sac_losses

__all__ = ["DEFAULT_CONFIG", "SACTrainer", "SACTorchPolicy", "sac_losses"]
