from rlfleet.algorithms.cql.cql import ALGO_KEYS, DEFAULT_CONFIG, CQLTrainer
from rlfleet.algorithms.cql.cql_policy import CQLTorchPolicy, cql_losses

__all__ = ["ALGO_KEYS", "CQLTorchPolicy", "CQLTrainer", "DEFAULT_CONFIG", "cql_losses"]
