"""Ape-X: distributed prioritized experience replay (DQN and DDPG)."""
from rlfleet.algorithms.apex.apex import DEFAULT_CONFIG, ApexTrainer
from rlfleet.algorithms.apex.apex_ddpg import DEFAULT_CONFIG as APEX_DDPG_DEFAULT_CONFIG
from rlfleet.algorithms.apex.apex_ddpg import ApexDDPGTrainer

__all__ = ["APEX_DDPG_DEFAULT_CONFIG", "ApexDDPGTrainer", "ApexTrainer", "DEFAULT_CONFIG"]
