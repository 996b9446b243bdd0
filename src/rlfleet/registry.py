"""Algorithm names -> trainer classes.

This module imports nothing of rlfleet: each algorithm is named by its module and class
(strings) and imported on first use, so the lowest layers (e.g. ``rlfleet.config``, to
document an algorithm's keys) can look an algorithm up without importing every algorithm.
"""
from __future__ import annotations

import difflib
import importlib
from typing import Dict, List, Tuple

# name -> (module, trainer class name)
_ALGORITHMS: Dict[str, Tuple[str, str]] = {
    "PPO": ("rlfleet.algorithms.ppo", "PPOTrainer"),
    "DDPPO": ("rlfleet.algorithms.ddppo", "DDPPOTrainer"),
    "PG": ("rlfleet.algorithms.pg", "PGTrainer"),
    "DQN": ("rlfleet.algorithms.dqn", "DQNTrainer"),
    "SimpleQ": ("rlfleet.algorithms.dqn", "SimpleQTrainer"),
    "SAC": ("rlfleet.algorithms.sac", "SACTrainer"),
    "DDPG": ("rlfleet.algorithms.ddpg", "DDPGTrainer"),
    "TD3": ("rlfleet.algorithms.td3", "TD3Trainer"),
    "MARWIL": ("rlfleet.algorithms.marwil", "MARWILTrainer"),
    "BC": ("rlfleet.algorithms.bc", "BCTrainer"),
    "CQL": ("rlfleet.algorithms.cql", "CQLTrainer"),
    "A2C": ("rlfleet.algorithms.a2c", "A2CTrainer"),
    "A3C": ("rlfleet.algorithms.a3c", "A3CTrainer"),
    "IMPALA": ("rlfleet.algorithms.impala", "ImpalaTrainer"),
    "APPO": ("rlfleet.algorithms.appo", "APPOTrainer"),
    "APEX": ("rlfleet.algorithms.apex", "ApexTrainer"),
    "APEX_DDPG": ("rlfleet.algorithms.apex", "ApexDDPGTrainer"),
    "BanditLinUCB": ("rlfleet.algorithms.bandits", "BanditLinUCBTrainer"),
    "BanditLinTS": ("rlfleet.algorithms.bandits", "BanditLinTSTrainer"),
    "ES": ("rlfleet.algorithms.es", "ESTrainer"),
    "ARS": ("rlfleet.algorithms.ars", "ARSTrainer"),
    "R2D2": ("rlfleet.algorithms.r2d2", "R2D2Trainer"),
    "APEX_R2D2": ("rlfleet.algorithms.r2d2", "ApexR2D2Trainer"),
    "RNNSAC": ("rlfleet.algorithms.rnnsac", "RNNSACTrainer"),
    "MADDPG": ("rlfleet.algorithms.maddpg", "MADDPGTrainer"),
    "QMIX": ("rlfleet.algorithms.qmix", "QMIXTrainer"),
}


def list_algorithms() -> List[str]:
    """The registered algorithm names, sorted."""
    return sorted(_ALGORITHMS)


def get_trainer_class(name: str) -> type:
    """The trainer class registered as `name` (e.g. "PPO"), imported on first use.

    Args:
        name: a registered algorithm name (see ``list_algorithms()``).

    Returns:
        The trainer class.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in _ALGORITHMS:
        close = difflib.get_close_matches(str(name).upper(), list(_ALGORITHMS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown algorithm {name!r}; available: {list_algorithms()}.{hint}")
    module, attr = _ALGORITHMS[name]
    return getattr(importlib.import_module(module), attr)
