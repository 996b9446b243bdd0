"""Tests of rlfleet.config and rlfleet.utils.deep_update."""
from __future__ import annotations

import copy
import logging
import re
from pathlib import Path

import pytest

from rlfleet import config as C
from rlfleet.config.nested_keys import FREE_DICTS
from rlfleet.callbacks import DefaultCallbacks
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.registry import list_algorithms
from rlfleet.utils.deep_update import deep_update, merge_dicts
from tests.helpers import REPO_ROOT

SPEC = REPO_ROOT.parent / "shared" / "spec" / "000_faaa46d5ed94d82f.txt"

# The reference's COMMON_CONFIG top-level keys, deprecated ones excluded.
REFERENCE_TOP_LEVEL_KEYS = [
    "num_workers", "num_envs_per_worker", "create_env_on_driver", "rollout_fragment_length",
    "batch_mode", "gamma", "lr", "train_batch_size", "model", "optimizer", "horizon",
    "soft_horizon", "no_done_at_end", "env", "observation_space", "action_space", "env_config",
    "env_task_fn", "render_env", "record_env", "clip_rewards", "normalize_actions",
    "clip_actions", "preprocessor_pref", "log_level", "callbacks", "ignore_worker_failures",
    "log_sys_usage", "fake_sampler", "framework", "eager_tracing", "explore",
    "exploration_config", "evaluation_interval", "evaluation_num_episodes",
    "evaluation_parallel_to_training", "in_evaluation", "evaluation_config",
    "evaluation_num_workers", "custom_eval_function", "sample_async", "sample_collector",
    "observation_filter", "synchronize_filters", "tf_session_args", "local_tf_session_args",
    "compress_observations", "collect_metrics_timeout", "metrics_smoothing_episodes",
    "remote_worker_envs", "remote_env_batch_wait_ms", "min_iter_time_s",
    "timesteps_per_iteration", "seed", "extra_python_environs_for_driver",
    "extra_python_environs_for_worker", "num_gpus", "_fake_gpus", "num_cpus_per_worker",
    "num_gpus_per_worker", "custom_resources_per_worker", "num_cpus_for_driver",
    "placement_strategy", "input", "input_config", "actions_in_input_normalized",
    "input_evaluation", "postprocess_inputs", "shuffle_buffer_size", "output",
    "output_compress_columns", "output_max_file_size", "multiagent", "logger_config",
]
RLFLEET_EXTRA_KEYS = ["recreate_failed_workers", "disable_env_checking", "max_nonfinite_updates", "fast_path",
                      # Added by the reference during 1.x, after the spec (issue 26).
                      "evaluation_duration", "evaluation_duration_unit", "always_attach_evaluation_results",
                      "keep_per_episode_custom_metrics", "_disable_preprocessor_api",
                      "_record_env_episodes",
                      # RLlib 2.x's key: a Gymnasium vector env per worker.
                      "gym_env_vectorize_mode"]
DEPRECATED_TOP_LEVEL = ["simple_optimizer", "monitor"]

# The reference's defaults; keys that rlfleet changes on purpose are in DEVIATIONS.
REFERENCE_DEFAULTS = {
    "num_workers": 2, "num_envs_per_worker": 1, "create_env_on_driver": False,
    "rollout_fragment_length": 200, "batch_mode": "truncate_episodes", "gamma": 0.99,
    "lr": 0.0001, "train_batch_size": 200, "optimizer": {}, "horizon": None,
    "soft_horizon": False, "no_done_at_end": False, "env": None, "observation_space": None,
    "action_space": None, "env_config": {}, "env_task_fn": None, "render_env": False,
    "record_env": False, "clip_rewards": None, "normalize_actions": True,
    "clip_actions": False, "preprocessor_pref": "deepmind", "log_level": "WARN",
    "ignore_worker_failures": False, "log_sys_usage": True, "fake_sampler": False,
    "framework": "tf", "eager_tracing": False, "explore": True,
    "exploration_config": {"type": "StochasticSampling"}, "evaluation_interval": None,
    "evaluation_num_episodes": 10, "evaluation_parallel_to_training": False,
    "in_evaluation": False, "evaluation_config": {}, "evaluation_num_workers": 0,
    "custom_eval_function": None, "sample_async": False, "observation_filter": "NoFilter",
    "synchronize_filters": True,
    "tf_session_args": {
        "intra_op_parallelism_threads": 2, "inter_op_parallelism_threads": 2,
        "gpu_options": {"allow_growth": True}, "log_device_placement": False,
        "device_count": {"CPU": 1}, "allow_soft_placement": True,
    },
    "local_tf_session_args": {"intra_op_parallelism_threads": 8, "inter_op_parallelism_threads": 8},
    "compress_observations": False, "collect_metrics_timeout": 180,
    "metrics_smoothing_episodes": 100, "remote_worker_envs": False,
    "remote_env_batch_wait_ms": 0, "min_iter_time_s": 0, "timesteps_per_iteration": 0,
    "seed": None, "extra_python_environs_for_driver": {},
    "extra_python_environs_for_worker": {}, "num_gpus": 0, "_fake_gpus": False,
    "num_cpus_per_worker": 1, "num_gpus_per_worker": 0, "custom_resources_per_worker": {},
    "num_cpus_for_driver": 1, "placement_strategy": "PACK", "input": "sampler",
    "input_config": {}, "actions_in_input_normalized": False, "input_evaluation": ["is", "wis"],
    "postprocess_inputs": False, "shuffle_buffer_size": 0, "output": None,
    "output_compress_columns": ["obs", "new_obs"], "output_max_file_size": 64 * 1024 * 1024,
    "multiagent": {
        "policies": {}, "policy_map_capacity": 100, "policy_map_cache": None,
        "policy_mapping_fn": None, "policies_to_train": None, "observation_fn": None,
        "replay_mode": "independent", "count_steps_by": "env_steps",
    },
    "logger_config": None,
}
DEVIATIONS = {"num_workers": 0, "framework": "torch", "callbacks": DefaultCallbacks,
              "sample_collector": None, "recreate_failed_workers": False}

MODEL_REFERENCE = {
    "fcnet_hiddens": [256, 256], "fcnet_activation": "tanh", "conv_filters": None,
    "conv_activation": "relu", "post_fcnet_hiddens": [], "post_fcnet_activation": "relu",
    "free_log_std": False, "no_final_linear": False, "vf_share_layers": True,
    "framestack": True, "dim": 84, "grayscale": False, "zero_mean": True,
    "custom_model": None, "custom_model_config": {}, "custom_action_dist": None,
    "use_lstm": False, "max_seq_len": 20, "lstm_cell_size": 256,
    "lstm_use_prev_action": False, "lstm_use_prev_reward": False, "_time_major": False,
    "use_attention": False, "attention_num_transformer_units": 1, "attention_dim": 64,
    "attention_num_heads": 1, "attention_head_dim": 32, "attention_memory_inference": 50,
    "attention_memory_training": 50, "attention_position_wise_mlp_dim": 32,
    "attention_init_gru_gate_bias": 2.0, "attention_use_n_prev_actions": 0,
    "attention_use_n_prev_rewards": 0, "custom_preprocessor": None,
}


def merged(**overrides):
    return C.merge_configs(C.COMMON_CONFIG, overrides)


def validated(**overrides):
    cfg = merged(**overrides)
    C.validate_config(cfg)
    return cfg


@pytest.fixture(autouse=True)
def _fresh_notices():
    C._NOTICES_GIVEN.clear()
    yield
    C._NOTICES_GIVEN.clear()


# --- keys and defaults -------------------------------------------------------------------
def _spec_common_config_block() -> str:
    text = SPEC.read_text()
    start = text.index("COMMON_CONFIG: TrainerConfigDict = {")
    return text[start: text.index("# __sphinx_doc_end__", start)]


@pytest.mark.skipif(not SPEC.exists(), reason="spec file not present")
def test_every_spec_key_is_declared():
    block = _spec_common_config_block()
    top = set(re.findall(r'^    "(\w+)":', block, flags=re.M)) - set(DEPRECATED_TOP_LEVEL)
    assert top == set(REFERENCE_TOP_LEVEL_KEYS)
    assert top <= set(C.COMMON_CONFIG)
    ma_block = block[block.index('"multiagent": {'):]
    nested = set(re.findall(r'^        "(\w+)":', ma_block, flags=re.M))
    assert nested and nested <= set(C.COMMON_CONFIG["multiagent"])
    for dep in DEPRECATED_TOP_LEVEL:
        assert dep in block and dep in C.DEPRECATED_KEYS


def test_top_level_keys_exactly():
    assert set(C.COMMON_CONFIG) == set(REFERENCE_TOP_LEVEL_KEYS) | set(RLFLEET_EXTRA_KEYS)
    for dep in DEPRECATED_TOP_LEVEL:
        assert dep not in C.COMMON_CONFIG  # own table, no sentinel values


def test_defaults_match_reference_except_deviations():
    for key, ref in REFERENCE_DEFAULTS.items():
        if key not in DEVIATIONS:
            assert C.COMMON_CONFIG[key] == ref, key
    for key, value in DEVIATIONS.items():
        assert C.COMMON_CONFIG[key] == value, key
    assert C.COMMON_CONFIG["callbacks"] is DefaultCallbacks
    assert C.DEFAULT_POLICY_ID == "default_policy"


def test_model_defaults():
    # rlfleet's own model key beyond the reference: built-in action masking (issue 15)
    assert C.MODEL_DEFAULTS == dict(MODEL_REFERENCE, action_mask_key="action_mask")
    assert C.COMMON_CONFIG["model"] == C.MODEL_DEFAULTS
    assert C.COMMON_CONFIG["model"] is not C.MODEL_DEFAULTS
    assert C.COMMON_CONFIG["model"]["fcnet_hiddens"] is not C.MODEL_DEFAULTS["fcnet_hiddens"]


def test_every_key_declared_once_with_a_doc():
    names = [k.name for keys in C.COMMON_KEYS.values() for k in keys]
    assert len(names) == len(set(names))
    assert len(C.MODEL_KEYS) == len({k.name for k in C.MODEL_KEYS})
    for path, key in C.KEY_INDEX.items():
        assert key.doc.strip(), path


def test_describe_keys_lists_every_key():
    text = C.describe_keys()
    for path, key in C.KEY_INDEX.items():
        assert f"| `{path}` |" in text
        assert key.doc.replace("|", "\\|") in text
    for path in C.DEPRECATED_KEYS:
        assert f"`{path}`" in text
    assert "`rlfleet.callbacks.DefaultCallbacks`" in text


def test_common_config_validates_as_is():
    cfg = copy.deepcopy(C.COMMON_CONFIG)
    C.validate_config(cfg)
    assert cfg["multiagent"]["policies"] == {"default_policy": PolicySpec(config={})}


# --- merging -------------------------------------------------------------------------------
def test_unknown_top_level_key_suggests_closest():
    with pytest.raises(ValueError, match=r"Unknown config key 'num_worker'; did you mean 'num_workers'\?"):
        merged(num_worker=1)


def test_unknown_nested_key_names_path():
    with pytest.raises(ValueError, match=r"'model\.fcnet_hidden'; did you mean 'model\.fcnet_hiddens'\?"):
        C.merge_configs(C.COMMON_CONFIG, {"model": {"fcnet_hidden": [8]}}, allow_unknown_subkeys=[])


def test_unknown_key_without_close_match():
    with pytest.raises(ValueError, match=r"Unknown config key 'zzzzqqq'; none of the \d+ known keys"):
        merged(zzzzqqq=1)
    with pytest.raises(ValueError, match=r"'a\.zz'; valid keys here are \['x', 'y'\]"):
        deep_update({"a": {"x": 1, "y": 2}}, {"a": {"zz": 3}})


def test_allow_unknown_configs_and_with_common_config():
    cfg = C.merge_configs(C.COMMON_CONFIG, {"my_key": 1}, allow_unknown_configs=True)
    assert cfg["my_key"] == 1
    algo = C.with_common_config({"lambda": 0.95, "lr": 5e-5})
    assert algo["lambda"] == 0.95 and algo["lr"] == 5e-5
    assert algo["gamma"] == 0.99
    assert C.COMMON_CONFIG["lr"] == 0.0001
    with pytest.raises(ValueError, match="'lambd'; did you mean 'lambda'"):
        C.merge_configs(algo, {"lambd": 1.0})


_FREE = [k for k in C.ALLOW_UNKNOWN_SUBKEYS if k in FREE_DICTS]


@pytest.mark.parametrize("key", _FREE)
def test_allowed_subkeys(key):
    cfg = merged(**{key: {"brand_new": {"deeper": 1}}})
    assert cfg[key]["brand_new"] == {"deeper": 1}


# Issue 26: the reference lets anything into these; rlfleet checks their keys (nested_keys.py).
@pytest.mark.parametrize("key", sorted(set(C.ALLOW_UNKNOWN_SUBKEYS) - set(_FREE)))
def test_checked_subkeys(key):
    with pytest.raises(ValueError, match=rf"Unknown config key '{key}\.brand_new'"):
        merged(**{key: {"brand_new": {"deeper": 1}}})


def test_allowed_subkey_lists_match_reference():
    assert set(C.ALLOW_UNKNOWN_SUBKEYS) == {
        "tf_session_args", "local_tf_session_args", "env_config", "model", "optimizer",
        "multiagent", "custom_resources_per_worker", "evaluation_config", "exploration_config",
        "extra_python_environs_for_driver", "extra_python_environs_for_worker", "input_config"}
    assert C.OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES == ["exploration_config"]


def test_nested_merge_keeps_other_subkeys():
    cfg = merged(model={"fcnet_hiddens": [32]}, multiagent={"count_steps_by": "agent_steps"})
    assert cfg["model"]["fcnet_hiddens"] == [32]
    assert cfg["model"]["fcnet_activation"] == "tanh"
    assert cfg["multiagent"]["count_steps_by"] == "agent_steps"
    assert cfg["multiagent"]["policy_map_capacity"] == 100


def test_exploration_config_replaced_whole_on_type_change():
    base = C.merge_configs(C.COMMON_CONFIG, {"exploration_config": {"type": "EpsilonGreedy",
                                                                     "initial_epsilon": 1.0}})
    assert base["exploration_config"] == {"type": "EpsilonGreedy", "initial_epsilon": 1.0}
    same = C.merge_configs(base, {"exploration_config": {"type": "EpsilonGreedy", "final_epsilon": 0.1}})
    assert same["exploration_config"] == {"type": "EpsilonGreedy", "initial_epsilon": 1.0,
                                          "final_epsilon": 0.1}
    other = C.merge_configs(base, {"exploration_config": {"type": "GaussianNoise", "stddev": 0.1}})
    assert other["exploration_config"] == {"type": "GaussianNoise", "stddev": 0.1}
    no_type = C.merge_configs(base, {"exploration_config": {"final_epsilon": 0.5}})
    assert no_type["exploration_config"]["type"] == "EpsilonGreedy"


def test_callbacks_dict_becomes_factory_and_legacy_fn_runs():
    calls = []
    user = {"callbacks": {"on_train_result": lambda info: calls.append(info["result"])}}
    snapshot = dict(user["callbacks"])
    cfg = C.merge_configs(C.COMMON_CONFIG, user)
    assert isinstance(user["callbacks"], dict) and user["callbacks"] == snapshot  # not mutated
    C.validate_config(cfg)
    callbacks = cfg["callbacks"]()
    assert isinstance(callbacks, DefaultCallbacks)
    callbacks.on_train_result(trainer=None, result={"x": 1})
    assert calls == [{"x": 1}]


def test_callbacks_validation():
    cfg = merged()
    cfg["callbacks"] = None
    C.validate_config(cfg)
    assert cfg["callbacks"] is DefaultCallbacks

    class Mine(DefaultCallbacks):
        pass

    assert validated(callbacks=Mine)["callbacks"] is Mine
    with pytest.raises(ValueError, match=r"'callbacks': 3 is invalid; expected a DefaultCallbacks subclass"):
        validated(callbacks=3)


def test_merge_does_not_mutate_inputs_or_share_containers():
    base = C.with_common_config({"extra": {"a": [1, 2]}})
    base_copy = copy.deepcopy(base)
    user = {"model": {"fcnet_hiddens": [64, 64]}, "env_config": {"k": [1]},
            "exploration_config": {"type": "StochasticSampling"}, "monitor": False,
            "input_evaluation": ("is",), "multiagent": {"policies": {"default_policy"}}}
    user_copy = copy.deepcopy(user)
    cfg = C.merge_configs(base, user)
    assert base == base_copy and user == user_copy
    cfg["model"]["fcnet_hiddens"].append(1)
    cfg["env_config"]["k"].append(2)
    cfg["exploration_config"]["x"] = 1
    C.validate_config(cfg)
    assert base == base_copy and user == user_copy
    assert C.merge_configs(base, None) == base


def test_deep_update_and_merge_dicts():
    orig = {"a": 1, "b": {"c": 2}}
    assert deep_update(orig, {"b": {"c": 3}}) is orig and orig == {"a": 1, "b": {"c": 3}}
    assert deep_update({"a": 1}, {"n": 2}, new_keys_allowed=True) == {"a": 1, "n": 2}
    assert deep_update({"d": {"x": 1}}, {"d": {"y": 2}}, allow_new_subkey_list=["d"]) == \
        {"d": {"x": 1, "y": 2}}
    # A non-dict value replaces a dict and vice versa.
    assert deep_update({"d": {"x": 1}}, {"d": None}) == {"d": None}
    a = {"x": {"y": 1}}
    m = merge_dicts(a, {"x": {"z": 2}, "w": 3})
    assert m == {"x": {"y": 1, "z": 2}, "w": 3} and a == {"x": {"y": 1}}


# --- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, expected", [
    ({"num_workers": -1}, "'num_workers': -1 is invalid; expected an int >= 0"),
    ({"num_workers": True}, "'num_workers': True is invalid; expected an int >= 0"),
    ({"num_envs_per_worker": 0}, "'num_envs_per_worker': 0 is invalid; expected an int >= 1"),
    ({"rollout_fragment_length": 0}, "'rollout_fragment_length': 0 is invalid; expected an int >= 1"),
    ({"train_batch_size": 10.5}, "'train_batch_size': 10.5 is invalid; expected an int >= 1"),
    ({"evaluation_num_episodes": 0}, "'evaluation_num_episodes': 0 is invalid; expected an int >= 1"),
    ({"metrics_smoothing_episodes": 0}, "'metrics_smoothing_episodes': 0 is invalid; expected an int >= 1"),
    ({"timesteps_per_iteration": -5}, "'timesteps_per_iteration': -5 is invalid; expected an int >= 0"),
    ({"gamma": 1.5}, "'gamma': 1.5 is invalid; expected a number in [0, 1]"),
    ({"gamma": "0.9"}, "'gamma': '0.9' is invalid; expected a number in [0, 1]"),
    ({"lr": -0.1}, "'lr': -0.1 is invalid; expected a number >= 0"),
    ({"lr": float("nan")}, "'lr': nan is invalid; expected a number >= 0"),
    ({"min_iter_time_s": -1}, "'min_iter_time_s': -1 is invalid; expected a number >= 0"),
    ({"observation_filter": "Zscore"},
     "'observation_filter': 'Zscore' is invalid; expected one of ['NoFilter', 'MeanStdFilter'] or a callable"),
    ({"clip_rewards": -1.0}, "'clip_rewards': -1.0 is invalid; expected None (clip for Atari only)"),
    ({"clip_rewards": (2, 1)}, "'clip_rewards': (2, 1) is invalid"),
    ({"clip_rewards": "yes"}, "'clip_rewards': 'yes' is invalid"),
    ({"log_level": "verbose"},
     "'log_level': 'verbose' is invalid; expected one of ['DEBUG', 'INFO', 'WARN', 'WARNING', 'ERROR']"),
    ({"placement_strategy": "ANY"},
     "'placement_strategy': 'ANY' is invalid; expected one of ['PACK', 'SPREAD', 'STRICT_PACK', 'STRICT_SPREAD']"),
    ({"horizon": 0}, "'horizon': 0 is invalid; expected None (the env's own limit) or an int >= 1"),
    ({"evaluation_interval": 0}, "'evaluation_interval': 0 is invalid; expected None (no evaluation) or an int >= 1"),
    ({"seed": "abc"}, "'seed': 'abc' is invalid; expected None (unseeded) or an int >= 0"),
    ({"batch_mode": "episodes"},
     "'batch_mode': 'episodes' is invalid; expected one of ['truncate_episodes', 'complete_episodes']"),
    ({"multiagent": {"count_steps_by": "steps"}},
     "'multiagent.count_steps_by': 'steps' is invalid; expected one of ['env_steps', 'agent_steps']"),
    ({"input_evaluation": "is"}, "'input_evaluation': 'is' is invalid; expected a list of estimator names"),
    ({"model": {"max_seq_len": 0}}, "'model.max_seq_len': 0 is invalid; expected an int >= 1"),
    ({"model": {"fcnet_hiddens": [64, -1]}}, "'model.fcnet_hiddens': [64, -1] is invalid; expected a list of ints > 0"),
    ({"evaluation_config": 3}, "'evaluation_config': 3 is invalid; expected a dict (or None)"),
    ({"framework": "jax"}, "'framework': 'jax' is invalid; expected 'torch' (or RLlib 1.x's 'tf', 'tf2', 'tfe'"),
])
def test_validation_errors(overrides, expected):
    with pytest.raises(ValueError) as info:
        validated(**overrides)
    assert expected in str(info.value)


@pytest.mark.parametrize("value", [None, True, False, 1.0, 5, (-2.0, 3.0), [-1, 1]])
def test_clip_rewards_accepted(value):
    assert validated(clip_rewards=value)["clip_rewards"] == value


def test_valid_values_and_normalizations():
    cfg = validated(train_batch_size=4000.0, seed=3, horizon=100, evaluation_interval=2,
                    observation_filter="MeanStdFilter", log_level="DEBUG", input_evaluation=("is",),
                    model=None, evaluation_config=None, env_config=None)
    assert cfg["train_batch_size"] == 4000 and isinstance(cfg["train_batch_size"], int)
    assert cfg["input_evaluation"] == ["is"]
    assert cfg["model"] == {} and cfg["evaluation_config"] == {} and cfg["env_config"] == {}
    assert callable(validated(observation_filter=lambda shape: None)["observation_filter"])
    # Ints stay ints; whole floats from YAML/JSON become ints.
    assert validated(num_envs_per_worker=3)["num_envs_per_worker"] == 3
    assert validated(gamma=1)["gamma"] == 1 and validated(lr=0)["lr"] == 0


def test_record_env_empty_string_means_default_folder():
    assert validated(record_env="")["record_env"] is True


@pytest.mark.parametrize("policies", [{}, None, {"default_policy"}, ["default_policy"]])
def test_policies_default_forms(policies):
    cfg = merged()
    cfg["multiagent"]["policies"] = policies
    C.validate_config(cfg)
    assert cfg["multiagent"]["policies"] == {"default_policy": PolicySpec(None, None, None, {})}


def test_policies_tuple_to_policyspec():
    cfg = validated(multiagent={"policies": {"a": (None, "obs", "act", None),
                                             "b": [None, None, None, {"lr": 1.0}],
                                             "c": PolicySpec()},
                                "policies_to_train": None})
    pols = cfg["multiagent"]["policies"]
    assert pols["a"] == PolicySpec(None, "obs", "act", {})
    assert pols["b"].config == {"lr": 1.0} and isinstance(pols["b"], PolicySpec)
    assert pols["c"] == PolicySpec(config={})
    assert set(validated(multiagent={"policies": {"p1", "p2"}})["multiagent"]["policies"]) == {"p1", "p2"}


@pytest.mark.parametrize("policies, expected", [
    ({1: PolicySpec()}, "policy id 1 is a int; policy ids must be str"),
    ({"a": (None, None)}, "the spec of policy 'a' is (None, None); expected a PolicySpec or a 4-tuple"),
    ({"a": "PPO"}, "the spec of policy 'a' is 'PPO'"),
    ({"a": PolicySpec(config=[1])}, "the config of policy 'a' is [1]; expected a dict or None"),
    ("default_policy", "'multiagent.policies': 'default_policy' is invalid; expected a dict"),
])
def test_policies_errors(policies, expected):
    cfg = merged()
    cfg["multiagent"]["policies"] = policies
    with pytest.raises(ValueError) as info:
        C.validate_config(cfg)
    assert expected in str(info.value)


def test_eval_workers_without_interval_sets_interval(caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        cfg = validated(evaluation_num_workers=2)
    assert cfg["evaluation_interval"] == 1
    assert "no evaluation_interval" in caplog.text


def test_parallel_eval_without_eval_workers_is_switched_off(caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        cfg = validated(evaluation_parallel_to_training=True, evaluation_interval=1)
    assert cfg["evaluation_parallel_to_training"] is False
    assert "evaluation_parallel_to_training needs evaluation_num_workers > 0" in caplog.text


def test_tf_keys_ignored_with_one_time_notice(caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        validated()
        assert "TensorFlow" not in caplog.text  # defaults: no notice
        validated(eager_tracing=True, tf_session_args={"intra_op_parallelism_threads": 4})
        validated(eager_tracing=True, tf_session_args={"intra_op_parallelism_threads": 4})
    notices = [r for r in caplog.records if "only applies to TensorFlow" in r.getMessage()]
    assert sorted(r.getMessage().split("'")[1] for r in notices) == ["eager_tracing", "tf_session_args"]


# --- deprecated keys -------------------------------------------------------------------------
def test_deprecated_keys_table():
    assert set(C.DEPRECATED_KEYS) == {"simple_optimizer", "monitor", "model.lstm_use_prev_action_reward"}


def test_simple_optimizer_warns_and_is_dropped(caplog):
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        cfg = validated(simple_optimizer=True)
    assert "'simple_optimizer' is deprecated and ignored" in caplog.text
    assert "simple_optimizer" not in cfg


def test_monitor_maps_to_record_env(caplog):
    cfg = merged(monitor=True)
    assert cfg["monitor"] is True  # merging accepts it untouched
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        C.validate_config(cfg)
    assert "'monitor' is deprecated; use 'record_env' instead" in caplog.text
    assert cfg["record_env"] is True and "monitor" not in cfg


def test_lstm_prev_action_reward_maps_to_both(caplog):
    # Accepted even where model sub-keys are otherwise strict.
    cfg = C.merge_configs(C.COMMON_CONFIG, {"model": {"lstm_use_prev_action_reward": True}},
                          allow_unknown_subkeys=[])
    with caplog.at_level(logging.WARNING, logger="rlfleet.config"):
        C.validate_config(cfg)
    assert "'model.lstm_use_prev_action_reward' is deprecated" in caplog.text
    assert cfg["model"]["lstm_use_prev_action"] is True
    assert cfg["model"]["lstm_use_prev_reward"] is True
    assert "lstm_use_prev_action_reward" not in cfg["model"]


def test_deprecated_keys_accepted_by_strict_merge():
    cfg = C.merge_configs(C.COMMON_CONFIG, {"simple_optimizer": False, "monitor": False})
    assert cfg["simple_optimizer"] is False and cfg["monitor"] is False


# --- not yet available -------------------------------------------------------------------------
# Every feature of the reference's config is built (num_gpus / _fake_gpus were the last rows):
# the table is empty. The mechanism stays, tested here with a row added for the test.
NON_DEFAULT: dict = {}


def test_not_yet_available_table_is_covered():
    assert set(NON_DEFAULT) == set(C.NOT_YET_AVAILABLE)
    for path in C.NOT_YET_AVAILABLE:
        assert path in C.KEY_INDEX, path


def _set(cfg, path, value):
    *parents, leaf = path.split(".")
    for p in parents:
        cfg = cfg[p]
    cfg[leaf] = value


@pytest.fixture
def a_row_not_available(monkeypatch):
    monkeypatch.setitem(C.NOT_YET_AVAILABLE, "num_envs_per_worker", "needs testing")
    monkeypatch.setitem(C.NOT_YET_AVAILABLE, "model.use_attention", "needs more testing")


def test_not_yet_available_errors(a_row_not_available):
    cfg = merged()
    _set(cfg, "model.use_attention", True)
    with pytest.raises(ValueError) as info:
        C.validate_config(cfg)
    msg = str(info.value)
    assert "'model.use_attention': " in msg and "is not available yet in this version of rlfleet" in msg
    assert "needs more testing" in msg and "use the default False" in msg


def test_not_yet_available_exact_message(a_row_not_available):
    with pytest.raises(ValueError) as info:
        validated(num_envs_per_worker=2)
    assert str(info.value) == ("'num_envs_per_worker': 2 is not available yet in this version of rlfleet "
                               "(needs testing); use the default 1")


def test_not_yet_available_lists_all_offenders_and_defaults_pass(a_row_not_available):
    with pytest.raises(ValueError) as info:
        C.check_available(merged(num_envs_per_worker=2, model={"use_attention": True}))
    assert "'num_envs_per_worker'" in str(info.value) and "'model.use_attention'" in str(info.value)
    C.check_available(merged())


def test_gpu_keys_are_available_with_value_checks():
    # Built now (policy/towers.py): fake GPUs validate anywhere; real ones need CUDA.
    assert validated(num_gpus=2, _fake_gpus=True)["num_gpus"] == 2
    assert validated(num_gpus_per_worker=0.5, _fake_gpus=True)["num_gpus_per_worker"] == 0.5
    for bad in ({"num_gpus": -1}, {"num_gpus": 10 ** 6}, {"_fake_gpus": "yes"}, {"num_gpus_per_worker": "1"}):
        with pytest.raises(ValueError, match=f"'{next(iter(bad))}'"):
            validated(**bad)


def test_exploration_type_known_names_classes_and_paths_pass():
    from rlfleet.exploration.noise import GaussianNoise

    for kind in ("EpsilonGreedy", "GaussianNoise", "OrnsteinUhlenbeckNoise", "StochasticSampling",
                 GaussianNoise, "rlfleet.exploration.noise.GaussianNoise"):
        cfg = merged(exploration_config={"type": kind})
        C.validate_config(cfg)
        assert cfg["exploration_config"]["type"] is kind


def test_exploration_type_unknown_is_a_clear_error():
    with pytest.raises(ValueError) as info:
        validated(exploration_config={"type": "EpsilonGreed"})
    msg = str(info.value)
    assert "'exploration_config.type': 'EpsilonGreed' is invalid" in msg
    assert "EpsilonGreedy" in msg and "GaussianNoise" in msg


# ---------------------------------------------------------------------------------------
# Algorithm keys (declared as ConfigKeys by each algorithm) and the registry.
# ---------------------------------------------------------------------------------------
# Derived from the registry, so that a new algorithm is checked here without an edit.
ALGORITHMS = list_algorithms()


def algorithm_config(name, **overrides):
    from rlfleet.registry import get_trainer_class

    trainer_class = get_trainer_class(name)
    return trainer_class.merge_trainer_configs(trainer_class._default_config, overrides), trainer_class._algo_keys


def row(text, key):
    """The Markdown table row of `key` in `text` (exactly one)."""
    rows = [line for line in text.splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, (key, rows)
    return rows[0]


def test_describe_keys_of_ppo_gives_ppos_defaults():
    text = C.describe_keys("PPO")
    assert "| `clip_param` | `0.3` |" in row(text, "clip_param")
    assert "| `lambda` | `1.0` |" in row(text, "lambda")
    assert "| `lr` | `5e-05` |" in row(text, "lr")  # PPO's, not the common 0.0001
    assert "| `model.vf_share_layers` | `False` |" in row(text, "model.vf_share_layers")
    assert "| `gamma` | `0.99` |" in row(text, "gamma")  # common keys are there too
    assert C.describe_keys() == C.describe_keys(None)


def test_describe_keys_of_dqn_lists_replay_keys_and_its_exploration():
    text = C.describe_keys("DQN")
    for key, default in (("buffer_size", "50000"), ("prioritized_replay", "True"), ("learning_starts", "1000"),
                         ("n_step", "1"), ("target_network_update_freq", "500"), ("num_atoms", "1"),
                         ("exploration_config.type", "'EpsilonGreedy'")):
        assert f"| `{key}` | `{default}` |" in row(text, key)
    assert "'epsilon_timesteps': 10000" in row(text, "exploration_config")
    assert "| `buffer_size` | `1000000` |" in row(C.describe_keys("SAC"), "buffer_size")


@pytest.mark.parametrize("name", ALGORITHMS)
def test_describe_keys_documents_every_key_an_algorithm_takes(name):
    config, _ = algorithm_config(name)
    text = C.describe_keys(name)
    for key in config:
        row(text, key)


def test_describe_keys_of_an_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown algorithm 'PPX'.*'PPO'"):
        C.describe_keys("PPX")


@pytest.mark.parametrize("name", ALGORITHMS)
def test_algorithm_defaults_pass_their_own_checks(name):
    config, keys = algorithm_config(name)
    C.validate_config(config, keys)


@pytest.mark.parametrize("name, bad, key", [
    ("PPO", {"lambda": -1}, "lambda"),
    ("PPO", {"clip_param": None}, "clip_param"),
    ("PPO", {"num_sgd_iter": 0}, "num_sgd_iter"),
    ("PPO", {"entropy_coeff": -0.1}, "entropy_coeff"),
    ("SAC", {"Q_model": {"fcnet_hiddens": [0]}}, "Q_model.fcnet_hiddens"),
    ("SAC", {"tau": 0}, "tau"),
    ("SAC", {"target_entropy": "high"}, "target_entropy"),
    ("DQN", {"num_atoms": 0}, "num_atoms"),
    ("DQN", {"hiddens": [64, -1]}, "hiddens"),
    ("DQN", {"prioritized_replay_eps": 0}, "prioritized_replay_eps"),
    ("DDPG", {"policy_delay": 0}, "policy_delay"),
    ("DDPG", {"actor_hidden_activation": "sigmoidd"}, "actor_hidden_activation"),
    ("TD3", {"optimizer": None}, "optimizer"),
])
def test_a_bad_algorithm_value_names_the_key(name, bad, key):
    config, keys = algorithm_config(name, **bad)
    with pytest.raises(ValueError, match=rf"^'{re.escape(key)}': .* is invalid; expected"):
        C.validate_config(config, keys)


def test_ppo_trainer_rejects_bad_values_before_building_anything(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer

    for bad, message in (({"lambda": -1}, "'lambda': -1 is invalid; expected a number in [0, 1]"),
                         ({"clip_param": None}, "'clip_param': None is invalid; expected a number > 0")):
        with pytest.raises(ValueError) as info:
            PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config=bad)
        assert str(info.value) == message


def test_sac_trainer_rejects_a_zero_width_q_layer(tmp_path):
    from rlfleet.algorithms.sac import SACTrainer

    with pytest.raises(ValueError) as info:
        SACTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={"Q_model": {"fcnet_hiddens": [0]}})
    assert str(info.value) == "'Q_model.fcnet_hiddens': [0] is invalid; expected a list of ints > 0"


def test_replay_buffer_config_is_checked_with_the_keys_it_stands_for():
    config, keys = algorithm_config("DQN", replay_buffer_config={"capacity": 0})
    with pytest.raises(ValueError, match=r"'replay_buffer_config': .*'capacity' to be an int >= 1"):
        C.validate_config(config, keys)
    config, keys = algorithm_config("DQN", replay_buffer_config={"type": "Nope"})
    with pytest.raises(ValueError, match=r"'replay_buffer_config'.*PrioritizedReplayBuffer"):
        C.validate_config(config, keys)
    config, keys = algorithm_config("DQN", worker_side_prioritization=True)
    with pytest.raises(ValueError, match=r"'worker_side_prioritization': True is not available yet .*"
                                         r"use the default False"):
        C.validate_config(config, keys)


def test_cross_key_rules_stay_with_the_trainer(tmp_path):
    from rlfleet.algorithms.dqn import DQNTrainer

    config, keys = algorithm_config("DQN", num_atoms=51, v_min=10.0, v_max=-10.0)
    C.validate_config(config, keys)  # each value alone is fine
    with pytest.raises(ValueError, match=r"'v_min' \(10.0\) must be < 'v_max' \(-10.0\)"):
        DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config={"num_atoms": 51, "v_min": 10.0, "v_max": -10.0})


# Values of today's DEFAULT_CONFIGs (the reference's, see shared/design/ALGO_DEFAULTS.md):
# declaring the keys as ConfigKeys must not change any of them.
EXPECTED_DEFAULTS = {
    "PPO": {"lambda": 1.0, "clip_param": 0.3, "lr": 5e-5, "train_batch_size": 4000, "sgd_minibatch_size": 128,
            "num_sgd_iter": 30, "kl_coeff": 0.2, "vf_clip_param": 10.0, "gamma": 0.99},
    "PG": {"lr": 0.0004, "num_workers": 0, "train_batch_size": 200, "rollout_fragment_length": 200},
    "DQN": {"lr": 5e-4, "buffer_size": 50000, "prioritized_replay": True, "dueling": True, "hiddens": [256],
            "double_q": True, "grad_clip": 40, "train_batch_size": 32, "evaluation_config": {"explore": False},
            "exploration_config": {"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.02,
                                   "epsilon_timesteps": 10000}},
    "SimpleQ": {"prioritized_replay": False, "dueling": False, "hiddens": [], "double_q": False, "lr": 5e-4,
                "num_atoms": 1},
    "SAC": {"tau": 5e-3, "buffer_size": 1000000, "learning_starts": 1500, "target_network_update_freq": 0,
            "prioritized_replay": False, "Q_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
            "optimization": {"actor_learning_rate": 3e-4, "critic_learning_rate": 3e-4,
                             "entropy_learning_rate": 3e-4},
            "exploration_config": {"type": "StochasticSampling"}, "train_batch_size": 256},
    "DDPG": {"tau": 0.002, "l2_reg": 1e-6, "actor_hiddens": [400, 300], "prioritized_replay": True,
             "learning_starts": 1500, "exploration_config": {
                 "type": "OrnsteinUhlenbeckNoise", "random_timesteps": 1000, "ou_base_scale": 0.1, "ou_theta": 0.15,
                 "ou_sigma": 0.2, "initial_scale": 1.0, "final_scale": 0.02, "scale_timesteps": 10000}},
    "TD3": {"twin_q": True, "policy_delay": 2, "tau": 5e-3, "l2_reg": 0.0, "train_batch_size": 100,
            "buffer_size": 1000000, "prioritized_replay": False, "clip_rewards": False, "learning_starts": 10000,
            "exploration_config": {"type": "GaussianNoise", "random_timesteps": 10000, "stddev": 0.1,
                                   "initial_scale": 1.0, "final_scale": 1.0, "scale_timesteps": 1}},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_DEFAULTS))
def test_algorithm_defaults_are_unchanged(name):
    config, _ = algorithm_config(name)
    for key, value in EXPECTED_DEFAULTS[name].items():
        assert config[key] == value and type(config[key]) is type(value), (key, config[key])
    assert config["model"]["vf_share_layers"] is (name != "PPO")


def test_override_and_with_defaults():
    key = C.override("lr", 5e-5)
    assert key.default == 5e-5 and key.check is C.KEY_INDEX["lr"].check and key.doc == C.KEY_INDEX["lr"].doc
    with pytest.raises(ValueError, match=r"override\('lamda'\): not a common key"):
        C.override("lamda", 0.9)
    base = [C.ConfigKey("tau", 0.1, "Polyak.", C.number_above(0, 1))]
    variant = C.with_defaults(base, {"tau": 0.5, "gamma": 0.9})
    assert [(k.name, k.default) for k in variant] == [("tau", 0.5), ("gamma", 0.9)]
    assert base[0].default == 0.1  # the base list is not changed
    assert C.algorithm_config(variant)["tau"] == 0.5 and C.algorithm_config(variant)["gamma"] == 0.9


def test_registry_imports_nothing_of_rlfleet_and_is_reexported():
    import ast

    import rlfleet.algorithms.registry as old_place  # old module path: kept (it must still import)
    import rlfleet.registry as registry

    tree = ast.parse(Path(registry.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [m for m in imported if m.startswith("rlfleet")], imported
    assert old_place.get_trainer_class is registry.get_trainer_class
    assert old_place.list_algorithms is registry.list_algorithms
    # Each name leads to the trainer that calls itself by that name (results, checkpoints).
    from rlfleet.trainer import Trainer

    for name in registry.list_algorithms():
        trainer_class = registry.get_trainer_class(name)
        assert issubclass(trainer_class, Trainer) and trainer_class._name == name, (name, trainer_class)
