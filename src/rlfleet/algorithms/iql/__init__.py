from rlfleet.algorithms.iql.iql import ALGO_KEYS, DEFAULT_CONFIG, IQLTrainer
from rlfleet.algorithms.iql.iql_policy import IQLTorchPolicy, expectile_loss, iql_losses
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "IQLTorchPolicy", "IQLTrainer", "expectile_loss", "iql_losses"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
IQLConfig = config_class("IQL")
__all__ += ["IQLConfig"]
