"""Issue 26: keys inside nested config dicts are checked (nested_keys.py), the reference's
`framework: tf` runs in torch, and evaluation_config's values are checked with their path."""
from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Tuple

import pytest

from rlfleet import config as C
from rlfleet.config.nested_keys import exploration_parameters
from rlfleet.registry import get_trainer_class


def _merge(algo: str, user: Dict[str, Any]) -> dict:
    return C.merge_configs(get_trainer_class(algo)._default_config, user)


def _validate(algo: str, user: Dict[str, Any]) -> dict:
    cls = get_trainer_class(algo)
    config = C.merge_configs(cls._default_config, user)
    C.validate_config(config, cls._algo_keys)
    return config


@pytest.mark.parametrize("algo,user,message", [
    ("PPO", {"model": {"fcnet_hidden": [32]}},
     "Unknown config key 'model.fcnet_hidden'; did you mean 'model.fcnet_hiddens'?"),
    ("PPO", {"evaluation_config": {"explor": False}},
     "Unknown config key 'evaluation_config.explor'; did you mean 'evaluation_config.explore'?"),
    ("DQN", {"exploration_config": {"epsilon_timestep": 5}},
     "Unknown config key 'exploration_config.epsilon_timestep'; did you mean 'exploration_config.epsilon_timesteps'?"),
    ("PPO", {"multiagent": {"policy_mapping": None}},
     "Unknown config key 'multiagent.policy_mapping'; did you mean 'multiagent.policy_mapping_fn'?"),
    ("PPO", {"evaluation_config": {"model": {"fcnet_activaton": "relu"}}},
     "'evaluation_config.model.fcnet_activaton'; did you mean 'evaluation_config.model.fcnet_activation'?"),
    ("PPO", {"multiagent": {"policies": {"p": (None, None, None, {"gama": 0.9})}}},
     "'multiagent.policies.p.config.gama'; did you mean 'multiagent.policies.p.config.gamma'?"),
    # A new exploration type: its own constructor's parameters count, not the old type's.
    ("DQN", {"exploration_config": {"type": "StochasticSampling", "epsilon_timesteps": 5}},
     "Unknown config key 'exploration_config.epsilon_timesteps'"),
])
def test_a_misspelt_nested_key_is_an_error_naming_its_path(algo, user, message):
    with pytest.raises(ValueError) as info:
        _merge(algo, user)
    assert message in str(info.value)


@pytest.mark.parametrize("user,message", [
    ({"logger_config": {"typ": "CSVLogger"}}, "Unknown config key 'logger_config.typ'; did you mean 'logger_config.type'?"),
    ({"logger_config": {"type": ["CSVLogger", "JsonLogger"], "flush": True}},
     "Unknown config key 'logger_config.flush'"),
])
def test_options_of_rlfleets_loggers_are_checked(user, message):
    with pytest.raises(ValueError) as info:
        _merge("PPO", user)
    assert message in str(info.value)


def test_options_of_a_users_logger_stay_free():
    config = _merge("PPO", {"logger_config": {"type": "my_package.MyLogger", "flush_every": 3}})
    assert config["logger_config"]["flush_every"] == 3
    _merge("PPO", {"logger_config": {"type": "CSVLogger", "logdir": "/tmp/elsewhere"}})


def test_a_misspelt_replay_buffer_config_key_suggests_the_right_one():
    with pytest.raises(ValueError, match=r"did you mean 'replay_buffer_config\.capacity' for 'capacty'"):
        _validate("DQN", {"replay_buffer_config": {"capacty": 5}})


def test_user_owned_dicts_stay_free():
    config = _merge("PPO", {"env_config": {"anything": 1}, "model": {"custom_model_config": {"mine": [1]}},
                            "input_config": {"reader_option": 2}, "custom_resources_per_worker": {"tpu": 1},
                            "multiagent": {"policies": {"p": (object, None, None, {"my_own_key": 1})}}})
    assert config["model"]["custom_model_config"] == {"mine": [1]}
    assert config["env_config"] == {"anything": 1}


def test_the_right_nested_keys_pass():
    config = _validate("DQN", {"model": {"fcnet_hiddens": [32]}, "evaluation_config": {"explore": False},
                               "exploration_config": {"epsilon_timesteps": 5}})
    assert config["model"]["fcnet_hiddens"] == [32]
    assert config["exploration_config"]["epsilon_timesteps"] == 5


@pytest.mark.parametrize("user,message", [
    ({"evaluation_config": {"lr": "x"}}, "'evaluation_config.lr': 'x' is invalid; expected a number >= 0"),
    ({"evaluation_config": {"explore": "no"}}, "'evaluation_config.explore': 'no' is invalid; expected True or False"),
    ({"evaluation_config": {"model": {"fcnet_hiddens": [0]}}}, "'evaluation_config.model.fcnet_hiddens': [0]"),
])
def test_evaluation_config_values_are_checked_with_their_path(user, message):
    with pytest.raises(ValueError) as info:
        _validate("PPO", user)
    assert message in str(info.value)


def test_evaluation_config_is_not_changed_by_its_check():
    config = _validate("PPO", {"evaluation_config": {"explore": 0, "model": {"fcnet_hiddens": (8,)}}})
    assert config["evaluation_config"] == {"explore": 0, "model": {"fcnet_hiddens": (8,)}}


# --- framework: tf -----------------------------------------------------------------------
@pytest.mark.parametrize("framework", ["tf", "tf2", "tfe"])
def test_tensorflow_framework_runs_in_torch_with_one_warning(framework, caplog, monkeypatch):
    from rlfleet.config import validation

    monkeypatch.setattr(validation, "_NOTICES_GIVEN", set())
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        first = _validate("PPO", {"framework": framework})
        _validate("PPO", {"framework": framework})
    assert first["framework"] == "torch"
    warnings = [r for r in caplog.records if "runs the same model in torch" in r.getMessage()]
    assert len(warnings) == 1


def test_a_tensorflow_custom_model_is_an_error():
    tf_model = type("KerasNet", (type("Model", (), {"__module__": "keras.engine.training"}),), {})
    with pytest.raises(ValueError, match=r"'model.custom_model': KerasNet is a TensorFlow/Keras model"):
        _validate("PPO", {"framework": "tf", "model": {"custom_model": tf_model}})


def test_an_unknown_framework_is_an_error():
    with pytest.raises(ValueError, match=r"'framework': 'jax' is invalid; expected 'torch'"):
        _validate("PPO", {"framework": "jax"})


# --- fuzz: a misspelt key at any declared depth -----------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _declared_paths(algo: str) -> List[Tuple[str, ...]]:
    """Every nested key path the algorithm's config declares, down to three levels, with the
    keys valid beside its last part."""
    defaults = get_trainer_class(algo)._default_config
    paths: List[Tuple[str, ...]] = []
    for key, value in defaults.items():
        if isinstance(value, dict) and key in ("model", "multiagent", "Q_model", "policy_model"):
            paths += [(key, sub) for sub in value]
    paths += [("evaluation_config", key) for key in defaults]
    paths += [("evaluation_config", "model", sub) for sub in defaults["model"]]
    params = exploration_parameters(defaults["exploration_config"].get("type", "StochasticSampling")) or set()
    paths += [("exploration_config", p) for p in params if p != "type"]
    return paths


def _siblings(algo: str, path: Tuple[str, ...]) -> set:
    defaults = get_trainer_class(algo)._default_config
    if path[0] == "exploration_config":
        return set(exploration_parameters(defaults["exploration_config"].get("type", "StochasticSampling")))
    node = defaults
    for part in path[:-1]:
        node = defaults if part == "evaluation_config" else node[part]
    return set(node)


PATHS = {algo: _declared_paths(algo) for algo in ("PPO", "DQN", "SAC", "DDPG")}


@st.composite
def misspelt_paths(draw) -> Tuple[str, Tuple[str, ...]]:
    algo = draw(st.sampled_from(sorted(PATHS)))
    path = draw(st.sampled_from(PATHS[algo]))
    leaf = path[-1]
    i = draw(st.integers(0, len(leaf)))
    edit = draw(st.sampled_from(["drop", "insert", "swap"]))
    if edit == "drop" and len(leaf) > 1:
        wrong = leaf[:max(i - 1, 0)] + leaf[max(i, 1):]
    elif edit == "swap" and len(leaf) > 2:
        j = min(i, len(leaf) - 2)
        wrong = leaf[:j] + leaf[j + 1] + leaf[j] + leaf[j + 2:]
    else:
        wrong = leaf[:i] + draw(st.sampled_from("xqz_")) + leaf[i:]
    hypothesis.assume(wrong not in _siblings(algo, path))
    return algo, path[:-1] + (wrong,)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(misspelt_paths())
def test_fuzz_a_misspelt_nested_key_names_its_dotted_path(drawn):
    algo, path = drawn
    user: Dict[str, Any] = {}
    node = user
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = 1
    with pytest.raises(ValueError, match=re.escape(f"Unknown config key '{'.'.join(path)}'")):
        _merge(algo, user)
