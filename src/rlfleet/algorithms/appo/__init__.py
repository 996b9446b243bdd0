from rlfleet.algorithms.appo.appo import ALGO_KEYS, DEFAULT_CONFIG, APPOTrainer
from rlfleet.algorithms.appo.appo_policy import APPOTorchPolicy, appo_surrogate_loss

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "APPOTrainer", "APPOTorchPolicy", "appo_surrogate_loss"]
