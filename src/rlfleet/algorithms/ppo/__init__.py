from rlfleet.algorithms.ppo.ppo import ALGO_KEYS, DEFAULT_CONFIG, PPOTrainer
from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy, ppo_surrogate_loss
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "PPOTrainer", "PPOTorchPolicy", "ppo_surrogate_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
PPOConfig = config_class("PPO")
__all__ += ["PPOConfig"]
