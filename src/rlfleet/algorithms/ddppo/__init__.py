from rlfleet.algorithms.ddppo.ddppo import ALGO_KEYS, DEFAULT_CONFIG, DDPPOTrainer
from rlfleet.algorithms.ddppo.ddppo_policy import DDPPOTorchPolicy

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "DDPPOTrainer", "DDPPOTorchPolicy"]
