"""Linear contextual bandits: LinUCB and LinTS over disjoint per-arm linear models."""
from rlfleet.algorithms.bandits.bandit_policy import LinearBanditPolicy, LinTSPolicy, LinUCBPolicy
from rlfleet.algorithms.bandits.bandits import (TS_CONFIG, UCB_CONFIG, BanditLinTSTrainer, BanditLinUCBTrainer,
                                                batch_regret)
from rlfleet.algorithms.bandits.linear_models import DisjointLinearModels
from rlfleet.config.builder import config_class

__all__ = ["BanditLinTSTrainer", "BanditLinUCBTrainer", "DisjointLinearModels", "LinTSPolicy", "LinUCBPolicy",
           "LinearBanditPolicy", "TS_CONFIG", "UCB_CONFIG", "batch_regret"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
BanditLinTSConfig = config_class("BanditLinTS")
BanditLinUCBConfig = config_class("BanditLinUCB")
__all__ += ["BanditLinTSConfig", "BanditLinUCBConfig"]
