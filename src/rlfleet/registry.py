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
    "CRR": ("rlfleet.algorithms.crr", "CRRTrainer"),
    "IQL": ("rlfleet.algorithms.iql", "IQLTrainer"),
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
    "SlateQ": ("rlfleet.algorithms.slateq", "SlateQTrainer"),
    "MAML": ("rlfleet.algorithms.maml", "MAMLTrainer"),
    "DT": ("rlfleet.algorithms.dt", "DTTrainer"),
    "MBMPO": ("rlfleet.algorithms.mbmpo", "MBMPOTrainer"),
    "AlphaZero": ("rlfleet.algorithms.alphazero", "AlphaZeroTrainer"),
    "DreamerV3": ("rlfleet.algorithms.dreamerv3", "DreamerV3Trainer"),
    # Dreamer trains DreamerV3 (with a logged note), as RLlib 2.x replaced Dreamer with it.
    "Dreamer": ("rlfleet.algorithms.dreamerv3", "DreamerTrainer"),
}


# RLlib 2.x's names of builder classes that differ from "<trainer class name less Trainer>Config".
_CONFIG_ALIASES: Dict[str, str] = {"IMPALAConfig": "IMPALA", "ApexDQNConfig": "APEX"}


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


def config_class_name(name: str) -> str:
    """The name of the algorithm's config builder class: PPOTrainer's is ``PPOConfig``.

    Raises:
        KeyError: for an unknown algorithm name.
    """
    return _ALGORITHMS[name][1].replace("Trainer", "Config")


def config_classes() -> Dict[str, Tuple[str, str]]:
    """Every config builder class name (RLlib 2.x's spellings too), with the algorithm's package
    (which exports it) and registered name."""
    out = {config_class_name(name): (module, name) for name, (module, _) in _ALGORITHMS.items()}
    out.update({alias: (_ALGORITHMS[name][0], name) for alias, name in _CONFIG_ALIASES.items()})
    return out
