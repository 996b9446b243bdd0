from rlfleet.algorithms.maddpg.agent_policies import agent_policy_id, maddpg_policies
from rlfleet.algorithms.maddpg.maddpg import DEFAULT_CONFIG, MADDPGTrainer
from rlfleet.algorithms.maddpg.maddpg_policy import MADDPGTorchPolicy

__all__ = ["DEFAULT_CONFIG", "MADDPGTorchPolicy", "MADDPGTrainer", "agent_policy_id", "maddpg_policies"]
