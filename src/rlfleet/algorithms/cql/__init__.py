from rlfleet.algorithms.cql.cql import ALGO_KEYS, DEFAULT_CONFIG, CQLTrainer
from rlfleet.algorithms.cql.cql_policy import CQLTorchPolicy, cql_losses
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "CQLTorchPolicy", "CQLTrainer", "DEFAULT_CONFIG", "cql_losses"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
CQLConfig = config_class("CQL")
__all__ += ["CQLConfig"]
