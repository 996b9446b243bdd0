from rlfleet.algorithms.a2c.a2c import ACTOR_CRITIC_KEYS, ALGO_KEYS, DEFAULT_CONFIG, OPTIMIZER_KEYS, A2CTrainer
from rlfleet.algorithms.a2c.a2c_policy import A2CTorchPolicy, actor_critic_loss
from rlfleet.config.builder import config_class

__all__ = ["ACTOR_CRITIC_KEYS", "ALGO_KEYS", "DEFAULT_CONFIG", "OPTIMIZER_KEYS", "A2CTrainer", "A2CTorchPolicy",
           "actor_critic_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
A2CConfig = config_class("A2C")
__all__ += ["A2CConfig"]
