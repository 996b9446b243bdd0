from rlfleet.algorithms.marwil.marwil import ALGO_KEYS, DEFAULT_CONFIG, MARWILTrainer
from rlfleet.algorithms.marwil.marwil_policy import MARWILTorchPolicy, marwil_loss

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "MARWILTorchPolicy", "MARWILTrainer", "marwil_loss"]
