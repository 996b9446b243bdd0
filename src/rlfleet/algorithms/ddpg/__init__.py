from rlfleet.algorithms.ddpg.ddpg import DEFAULT_CONFIG, DDPGTrainer
from rlfleet.algorithms.ddpg.ddpg_policy import DDPGTorchPolicy, Deterministic, ddpg_losses
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "DDPGTrainer", "DDPGTorchPolicy", "Deterministic", "ddpg_losses"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
DDPGConfig = config_class("DDPG")
__all__ += ["DDPGConfig"]
