from rlfleet.algorithms.ppo.ppo import DEFAULT_CONFIG, PPOTrainer
from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy, ppo_surrogate_loss

__all__ = ["DEFAULT_CONFIG", "PPOTrainer", "PPOTorchPolicy", "ppo_surrogate_loss"]
