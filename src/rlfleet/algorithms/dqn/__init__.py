from rlfleet.algorithms.dqn.dqn import DEFAULT_CONFIG, SIMPLE_Q_DEFAULT_CONFIG, DQNTrainer, SimpleQTrainer
from rlfleet.algorithms.dqn.dqn_policy import DQNTorchPolicy, dqn_loss, project_distribution

__all__ = ["DEFAULT_CONFIG", "SIMPLE_Q_DEFAULT_CONFIG", "DQNTrainer", "SimpleQTrainer", "DQNTorchPolicy",
           "dqn_loss", "project_distribution"]
