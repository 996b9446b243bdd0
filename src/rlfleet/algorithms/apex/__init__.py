"""Ape-X: distributed prioritized experience replay (DQN and DDPG)."""
from rlfleet.algorithms.apex.apex import DEFAULT_CONFIG, ApexTrainer
from rlfleet.algorithms.apex.apex_ddpg import DEFAULT_CONFIG as APEX_DDPG_DEFAULT_CONFIG
from rlfleet.algorithms.apex.apex_ddpg import ApexDDPGTrainer
from rlfleet.config.builder import config_class

__all__ = ["APEX_DDPG_DEFAULT_CONFIG", "ApexDDPGTrainer", "ApexTrainer", "DEFAULT_CONFIG"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
ApexConfig = config_class("APEX")
ApexDDPGConfig = config_class("APEX_DDPG")
ApexDQNConfig = ApexConfig  # RLlib 2.x's spelling
__all__ += ["ApexConfig", "ApexDDPGConfig", "ApexDQNConfig"]
