from rlfleet.algorithms.ppo.ppo import ALGO_KEYS, DEFAULT_CONFIG, PPOTrainer
from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy, ppo_surrogate_loss

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "PPOTrainer", "PPOTorchPolicy", "ppo_surrogate_loss"]
