"""Trainer configuration: every key declared once, merging, validation, deprecations.

Each key is declared exactly once below as ``ConfigKey(name, default, doc, check)``;
``COMMON_CONFIG``, ``MODEL_DEFAULTS``, the validation messages and the docs page
(``describe_keys()``) are all derived from those declarations. Each algorithm declares its
own keys the same way (its ``ALGO_KEYS``, with ``override`` for the common keys it gives
another default); its ``DEFAULT_CONFIG`` is ``algorithm_config(ALGO_KEYS)`` and
``describe_keys("PPO")`` documents every key it takes.

The package, one job per module: ``checks`` and ``key_checks`` (value checks), ``keys``
(the declarations), ``merge``, ``deprecation``, ``rllib2_names`` (RLlib 2.x's names of keys),
``validation``, ``docs`` (``describe_keys``) and ``builder`` (RLlib 2.x's ``AlgorithmConfig``
builder over the dict). Import the names from ``rlfleet.config``.

How a trainer builds its config::

    config = merge_configs(AlgoTrainer.DEFAULT_CONFIG, user_config)   # unknown key -> error
    validate_config(config, ALGO_KEYS)                                # normalizes in place

Deviations from the defaults of RLlib 1.x's ``COMMON_CONFIG`` (``rllib/agents/trainer.py``):

- ``num_workers`` defaults to 0: rlfleet's default is one process with no cluster, which
  starts instantly; ask for remote workers explicitly.
- ``framework`` defaults to ``"torch"``; RLlib 1.x's ``"tf"``, ``"tf2"`` and ``"tfe"`` run the same
  model in torch (one warning); a TensorFlow custom model is an error.
- ``sample_collector`` defaults to None, meaning rlfleet's built-in collector.
- ``tf_session_args``, ``local_tf_session_args`` and ``eager_tracing`` are accepted so old
  configs load, and ignored (a one-time log notice when set to a non-default value).
- ``recreate_failed_workers`` (default False) is new.
- ``disable_env_checking`` (default False; later RLlib versions have it) and
  ``max_nonfinite_updates`` (default 5) are new: see ``rlfleet.env.checks`` and
  ``TorchPolicy._step``.
- Deprecated keys live in ``DEPRECATED_KEYS``, not as sentinel values in ``COMMON_CONFIG``.
- Features that later versions enable are listed in ``NOT_YET_AVAILABLE``; setting one of
  them to a non-default value is a clear error (see ``check_available``).
"""
from __future__ import annotations

from rlfleet.config.checks import (Check, InvalidValue, activation, boolean, dict_value, finite_number,
                                   int_at_least, is_int, is_num, not_available, number_above, number_in,
                                   one_of, optional, positive_int_list, schedule)
from rlfleet.config.deprecation import (DEPRECATED_KEYS, NOT_YET_AVAILABLE, DeprecatedKey, check_available)
from rlfleet.config.docs import config_reference, describe_keys
from rlfleet.config.key_checks import legacy_callbacks_factory
from rlfleet.config.keys import (ALLOW_UNKNOWN_SUBKEYS, COMMON_CONFIG, COMMON_KEYS, IGNORED_KEYS, KEY_INDEX,
                                 MODEL_DEFAULTS, MODEL_KEYS, OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES, ConfigKey)
from rlfleet.config.merge import algorithm_config, merge_configs, override, with_common_config, with_defaults
from rlfleet.config.rllib2_names import RLLIB2_NAMES, Rllib2Name, rename_rllib2_keys
from rlfleet.config.validation import _NOTICES_GIVEN, check_keys, validate_config
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID

__all__ = [
    "ALLOW_UNKNOWN_SUBKEYS", "COMMON_CONFIG", "COMMON_KEYS", "DEFAULT_POLICY_ID", "DEPRECATED_KEYS", "IGNORED_KEYS",
    "KEY_INDEX", "MODEL_DEFAULTS", "MODEL_KEYS", "NOT_YET_AVAILABLE", "OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES",
    "RLLIB2_NAMES", "Rllib2Name",
    "Check", "ConfigKey", "DeprecatedKey", "InvalidValue", "_NOTICES_GIVEN", "activation", "algorithm_config",
    "boolean", "check_available", "check_keys", "config_reference", "describe_keys", "dict_value",
    "finite_number", "int_at_least", "is_int", "is_num", "legacy_callbacks_factory", "merge_configs",
    "not_available", "number_above", "number_in", "one_of", "optional", "override", "positive_int_list",
    "rename_rllib2_keys", "schedule", "validate_config", "with_common_config", "with_defaults",
]
