from rlfleet.algorithms.a2c.a2c import ACTOR_CRITIC_KEYS, ALGO_KEYS, DEFAULT_CONFIG, OPTIMIZER_KEYS, A2CTrainer
from rlfleet.algorithms.a2c.a2c_policy import A2CTorchPolicy, actor_critic_loss

__all__ = ["ACTOR_CRITIC_KEYS", "ALGO_KEYS", "DEFAULT_CONFIG", "OPTIMIZER_KEYS", "A2CTrainer", "A2CTorchPolicy",
           "actor_critic_loss"]
