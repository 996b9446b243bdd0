from rlfleet.algorithms.ddpg.ddpg import DEFAULT_CONFIG, DDPGTrainer
from rlfleet.algorithms.ddpg.ddpg_policy import DDPGTorchPolicy, Deterministic, ddpg_losses

__all__ = ["DEFAULT_CONFIG", "DDPGTrainer", "DDPGTorchPolicy", "Deterministic", "ddpg_losses"]
