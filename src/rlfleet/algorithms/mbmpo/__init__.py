"""Model-Based Meta-Policy Optimisation (MB-MPO): MAML over an ensemble of learned dynamics models."""
from rlfleet.algorithms.mbmpo.dynamics import DynamicsEnsemble
from rlfleet.algorithms.mbmpo.imagined_env import ImaginedVectorEnv, reward_function
from rlfleet.algorithms.mbmpo.imagined_rollout import imagine
from rlfleet.algorithms.mbmpo.mbmpo import ALGO_KEYS, DEFAULT_CONFIG, MBMPOTrainer
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "DynamicsEnsemble", "ImaginedVectorEnv", "MBMPOTrainer", "imagine",
           "reward_function"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
MBMPOConfig = config_class("MBMPO")
__all__ += ["MBMPOConfig"]
