from rlfleet.algorithms.maddpg.agent_policies import agent_policy_id, maddpg_policies
from rlfleet.algorithms.maddpg.maddpg import DEFAULT_CONFIG, MADDPGTrainer
from rlfleet.algorithms.maddpg.maddpg_policy import MADDPGTorchPolicy
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "MADDPGTorchPolicy", "MADDPGTrainer", "agent_policy_id", "maddpg_policies"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
MADDPGConfig = config_class("MADDPG")
__all__ += ["MADDPGConfig"]
