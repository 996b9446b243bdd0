"""Algorithm names -> trainer classes, imported on first use."""
from __future__ import annotations

import difflib
import importlib
from typing import List

_ALGORITHMS = {
    "PPO": ("rlfleet.algorithms.ppo", "PPOTrainer"),
    "PG": ("rlfleet.algorithms.pg", "PGTrainer"),
    "DQN": ("rlfleet.algorithms.dqn", "DQNTrainer"),
    "SimpleQ": ("rlfleet.algorithms.dqn", "SimpleQTrainer"),
    "SAC": ("rlfleet.algorithms.sac", "SACTrainer"),
    "DDPG": ("rlfleet.algorithms.ddpg", "DDPGTrainer"),
    "TD3": ("rlfleet.algorithms.td3", "TD3Trainer"),
}


def list_algorithms() -> List[str]:
    return sorted(_ALGORITHMS)


def get_trainer_class(name: str) -> type:
    """The trainer class registered as `name` (e.g. "PPO").

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in _ALGORITHMS:
        close = difflib.get_close_matches(str(name).upper(), list(_ALGORITHMS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown algorithm {name!r}; available: {list_algorithms()}.{hint}")
    module, attr = _ALGORITHMS[name]
    return getattr(importlib.import_module(module), attr)
