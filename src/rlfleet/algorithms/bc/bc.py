"""Behaviour cloning: MARWIL with beta 0 (maximise the log-likelihood of the logged actions)."""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.marwil.marwil import ALGO_KEYS as MARWIL_KEYS, MARWILTrainer
from rlfleet.config import ConfigKey, algorithm_config, with_defaults

ALGO_KEYS: List[ConfigKey] = with_defaults(MARWIL_KEYS, {"beta": 0.0})

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class BCTrainer(MARWILTrainer):
    """Behaviour cloning from (offline) data."""

    _name = "BC"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
