from rlfleet.algorithms.impala.impala import ALGO_KEYS, DEFAULT_CONFIG, VTRACE_KEYS, ImpalaTrainer
from rlfleet.algorithms.impala.impala_policy import ImpalaTorchPolicy

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "VTRACE_KEYS", "ImpalaTrainer", "ImpalaTorchPolicy"]
