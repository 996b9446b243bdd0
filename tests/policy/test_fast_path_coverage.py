"""Every config key of an algorithm with a NumPy learner, and every `model` key, is classified
for the fast path (rlfleet/policy/fast_plan.py's FAST_PATH_KEYS): handled by the NumPy maths,
falls back to torch, or not used by the loss. An unclassified key fails here, so a new option
cannot be silently ignored by the default path."""
from __future__ import annotations

import pytest

from rlfleet.config import COMMON_CONFIG, MODEL_DEFAULTS, ConfigKey
from rlfleet.policy.fast_plan import FAST_PATH_KEYS, HANDLED, NOT_USED, FallsBack, unclassified_keys
from rlfleet.policy.numpy_learner import declared_numpy_learner
from rlfleet.registry import get_trainer_class, list_algorithms


def _algo_keys():
    """`{algorithm: (its NumPy learner's FAST_PATH_KEYS family, its config keys)}` for every
    registered algorithm whose policy class names a NumPy learner (`numpy_learner`)."""
    out = {}
    for name in list_algorithms():
        trainer = get_trainer_class(name)
        learner = declared_numpy_learner(trainer._policy_class)
        if learner is not None:
            out[name] = (learner.family, list(trainer._algo_keys))
    return out


def test_the_algorithms_with_a_numpy_learner_are_found_and_each_family_is_used():
    algorithms = _algo_keys()
    assert {"PPO", "DQN", "SAC", "DDPG"} <= set(algorithms)  # the derivation finds the known learners
    assert {family for family, _ in algorithms.values()} == set(FAST_PATH_KEYS) - {"model"}


@pytest.mark.parametrize("algorithm", sorted(_algo_keys()))
def test_every_algorithm_key_is_classified(algorithm):
    family, keys = _algo_keys()[algorithm]
    assert unclassified_keys(family, [k.name for k in keys]) == [], (
        f"classify these {algorithm} keys in FAST_PATH_KEYS[{family!r}] (rlfleet/policy/fast_plan.py)")


def test_every_model_key_is_classified():
    assert unclassified_keys("model", MODEL_DEFAULTS) == []


def test_an_added_key_is_reported():
    _, keys = _algo_keys()["PPO"]
    names = [k.name for k in keys + [ConfigKey("ppo_new_option", 1.0, "a new loss coefficient")]]
    assert unclassified_keys("PPO", names) == ["ppo_new_option"]
    assert unclassified_keys("model", list(MODEL_DEFAULTS) + ["fcnet_dropout"]) == ["fcnet_dropout"]


def test_the_table_names_only_real_keys_and_classes():
    known = set(COMMON_CONFIG)
    for _, keys in _algo_keys().values():
        known |= {k.name for k in keys}
    for family, table in FAST_PATH_KEYS.items():
        for key, how in table.items():
            assert how in (HANDLED, NOT_USED) or isinstance(how, FallsBack), (family, key, how)
            assert key in (MODEL_DEFAULTS if family == "model" else known), (family, key)
