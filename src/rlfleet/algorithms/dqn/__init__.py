from rlfleet.algorithms.dqn.dqn import DEFAULT_CONFIG, SIMPLE_Q_DEFAULT_CONFIG, DQNTrainer, SimpleQTrainer
from rlfleet.algorithms.dqn.dqn_policy import DQNTorchPolicy, dqn_loss, project_distribution
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "SIMPLE_Q_DEFAULT_CONFIG", "DQNTrainer", "SimpleQTrainer", "DQNTorchPolicy",
           "dqn_loss", "project_distribution"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
DQNConfig = config_class("DQN")
SimpleQConfig = config_class("SimpleQ")
__all__ += ["DQNConfig", "SimpleQConfig"]
