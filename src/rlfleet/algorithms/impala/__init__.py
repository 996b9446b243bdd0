from rlfleet.algorithms.impala.impala import ALGO_KEYS, DEFAULT_CONFIG, VTRACE_KEYS, ImpalaTrainer
from rlfleet.algorithms.impala.impala_policy import ImpalaTorchPolicy
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "VTRACE_KEYS", "ImpalaTrainer", "ImpalaTorchPolicy"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
ImpalaConfig = config_class("IMPALA")
IMPALAConfig = ImpalaConfig  # RLlib 2.x's spelling
__all__ += ["ImpalaConfig", "IMPALAConfig"]
