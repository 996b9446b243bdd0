"""Linear contextual bandits: LinUCB and LinTS over disjoint per-arm linear models."""
from rlfleet.algorithms.bandits.bandit_policy import LinearBanditPolicy, LinTSPolicy, LinUCBPolicy
from rlfleet.algorithms.bandits.bandits import (TS_CONFIG, UCB_CONFIG, BanditLinTSTrainer, BanditLinUCBTrainer,
                                                batch_regret)
from rlfleet.algorithms.bandits.linear_models import DisjointLinearModels

__all__ = ["BanditLinTSTrainer", "BanditLinUCBTrainer", "DisjointLinearModels", "LinTSPolicy", "LinUCBPolicy",
           "LinearBanditPolicy", "TS_CONFIG", "UCB_CONFIG", "batch_regret"]
