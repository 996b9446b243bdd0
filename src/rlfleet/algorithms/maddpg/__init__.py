from rlfleet.algorithms.maddpg.maddpg import DEFAULT_CONFIG, MADDPGTrainer, maddpg_policies
from rlfleet.algorithms.maddpg.maddpg_policy import MADDPGTorchPolicy

__all__ = ["DEFAULT_CONFIG", "MADDPGTorchPolicy", "MADDPGTrainer", "maddpg_policies"]
