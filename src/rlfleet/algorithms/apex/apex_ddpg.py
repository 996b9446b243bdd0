"""Ape-X DDPG (Horgan et al. 2018): Ape-X's data flow (`rlfleet.algorithms.apex.apex`:
replay shards as Ray actors, workers adding n-step transitions with their own priorities, a
learner thread) on DDPG's policy, with Ornstein-Uhlenbeck noise of a fixed scale per worker."""
from __future__ import annotations

from typing import Any, Dict, List

from rlfleet.algorithms.apex.apex import (APEX_DEFAULTS, APEX_KEYS, ApexTrainer, fold_reference_optimizer,
                                          validate_apex)
from rlfleet.algorithms.ddpg.ddpg import ALGO_KEYS as DDPG_KEYS
from rlfleet.algorithms.ddpg.ddpg import DDPGTrainer
from rlfleet.algorithms.ddpg.ddpg_policy import DDPGTorchPolicy
from rlfleet.config import ConfigKey, algorithm_config, with_defaults

# RLlib 1.x's Ape-X DDPG defaults (`rllib/agents/ddpg/apex.py`) on top of DDPG's: Ape-X's,
# with DDPG's exploration.
# As RLlib 1.x: the targets are Polyak-averaged (with tau) once per
# `target_network_update_freq` trained steps; 0 averages after every update, as DDPG does.
APEX_DDPG_DEFAULTS: Dict[str, Any] = dict(
    APEX_DEFAULTS,
    exploration_config={"type": "PerWorkerOrnsteinUhlenbeckNoise"},
)

ALGO_KEYS: List[ConfigKey] = with_defaults(
    [k for k in DDPG_KEYS if k.name != "worker_side_prioritization"] + APEX_KEYS, APEX_DDPG_DEFAULTS)

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class ApexDDPGTrainer(ApexTrainer):
    """Ape-X DDPG: distributed prioritized experience replay for continuous actions."""

    _name = "APEX_DDPG"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = DDPGTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        # RLlib 1.x's optimizer entries moved, DDPG's rules (not DQN's), then Ape-X's.
        fold_reference_optimizer(config, self._default_config)
        DDPGTrainer.validate_algorithm_config(self, config)
        validate_apex(self._name, config)
