"""RLlib 2.x's names of keys in plain dict configs: translated to rlfleet's 1.x keys with no
warning, both spellings with different values refused, values rlfleet cannot honour refused."""
from __future__ import annotations

import logging

import pytest

from rlfleet import config as C
from rlfleet.config.rllib2_names import RLLIB2_NAMES
from rlfleet.registry import get_trainer_class
from rlfleet.trainer.resources import default_resource_request

PPO_DEFAULTS = get_trainer_class("PPO")._default_config
RENAMED = sorted(name for name, entry in RLLIB2_NAMES.items() if entry.key is not None)


def _value(key: str) -> object:
    # A value of the key's type other than its default, so that the merge shows it arrived.
    default = PPO_DEFAULTS[key]
    if isinstance(default, dict):
        return {"my_resource": 1}
    if isinstance(default, bool):
        return not default
    return default + 3 if isinstance(default, (int, float)) else 3


@pytest.mark.parametrize("name", RENAMED)
def test_each_2x_name_sets_its_1x_key_silently(name, caplog):
    key = RLLIB2_NAMES[name].key
    with caplog.at_level(logging.WARNING):
        merged = C.merge_configs(PPO_DEFAULTS, {name: _value(key)})
    assert merged[key] == _value(key) and name not in merged
    assert not caplog.records  # both spellings are current: no deprecation warning


def test_a_2x_config_validates_with_the_1x_keys_stored():
    user = {"num_env_runners": 0, "num_envs_per_env_runner": 4, "num_epochs": 2, "minibatch_size": 64,
            "metrics_num_episodes_for_smoothing": 5, "evaluation_num_env_runners": 0, "num_learners": 0,
            "num_gpus_per_learner": 0, "train_batch_size_per_learner": 256,
            "evaluation_config": {"num_envs_per_env_runner": 2}}
    config = C.merge_configs(PPO_DEFAULTS, user)
    C.validate_config(config, get_trainer_class("PPO")._algo_keys)
    assert (config["num_workers"], config["num_envs_per_worker"], config["num_sgd_iter"]) == (0, 4, 2)
    assert (config["sgd_minibatch_size"], config["metrics_smoothing_episodes"], config["train_batch_size"]) == (
        64, 5, 256)
    assert config["evaluation_config"] == {"num_envs_per_worker": 2}
    assert not set(RLLIB2_NAMES) & set(config)


def test_the_wrong_suggestions_of_unknown_keys_are_gone():
    # Before the table: num_epochs -> "did you mean 'num_gpus'", num_learners -> 'num_workers'.
    config = C.merge_configs(PPO_DEFAULTS, {"num_epochs": 3, "num_learners": 0,
                                            "metrics_num_episodes_for_smoothing": 7})
    assert config["num_sgd_iter"] == 3 and config["metrics_smoothing_episodes"] == 7
    assert "num_learners" not in config


def test_both_spellings_with_different_values_are_refused_naming_both():
    with pytest.raises(ValueError, match="'num_env_runners': 2 and 'num_workers': 1"):
        C.merge_configs(PPO_DEFAULTS, {"num_workers": 1, "num_env_runners": 2})
    with pytest.raises(ValueError, match="'num_rollout_workers': 3 and 'num_env_runners': 2"):
        C.merge_configs(PPO_DEFAULTS, {"num_env_runners": 2, "num_rollout_workers": 3})
    with pytest.raises(ValueError, match="'evaluation_config.num_envs_per_env_runner'"):
        C.merge_configs(PPO_DEFAULTS, {"evaluation_config": {"num_envs_per_worker": 1, "num_envs_per_env_runner": 2}})
    same = C.merge_configs(PPO_DEFAULTS, {"num_workers": 1, "num_env_runners": 1})
    assert same["num_workers"] == 1


def test_a_value_rlfleet_cannot_honour_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="'num_learners': 2 cannot be honoured.*'num_gpus'"):
        C.merge_configs(PPO_DEFAULTS, {"num_learners": 2})


def test_the_2x_name_of_a_key_the_algorithm_lacks_is_refused_by_name():
    with pytest.raises(ValueError, match="'minibatch_size': it is RLlib 2.x's name of 'sgd_minibatch_size'"):
        C.merge_configs(get_trainer_class("DQN")._default_config, {"minibatch_size": 32})


def test_resources_are_requested_for_the_2x_names():
    request = default_resource_request(PPO_DEFAULTS, {"num_env_runners": 2, "num_cpus_per_env_runner": 2})
    assert request.bundles[1:] == [{"CPU": 2, "GPU": 0}, {"CPU": 2, "GPU": 0}]


def test_a_trainer_stores_the_1x_keys(tmp_path):
    trainer = get_trainer_class("PG")(config={"num_env_runners": 0, "num_envs_per_env_runner": 2},
                                      env="CartPole-v1", logdir=str(tmp_path))
    try:
        assert trainer.config["num_envs_per_worker"] == 2
        user = trainer.user_config()  # what a checkpoint stores
        assert user["num_workers"] == 0 and user["num_envs_per_worker"] == 2
        assert not set(RLLIB2_NAMES) & set(user) and not set(RLLIB2_NAMES) & set(trainer.config)
    finally:
        trainer.stop()


def test_the_config_reference_lists_every_2x_name():
    text = C.describe_keys()
    for name in RLLIB2_NAMES:
        assert f"| `{name}` |" in text


def test_2x_names_in_policy_overlays_are_renamed_and_checked_like_the_top_levels():
    from rlfleet.policy.policy_spec import PolicySpec

    class OwnPolicy:  # a policy of its own class: its overlay is renamed, not checked
        pass

    user = {"multiagent": {"policies": {
        "spec": PolicySpec(config={"num_epochs": 4}),
        "tuple": (None, None, None, {"minibatch_size": 16}),
        "list": [None, None, None, {"num_envs_per_env_runner": 2}],
        "own": PolicySpec(OwnPolicy, config={"num_epochs": 5, "own_key": 1}),
        "bare": None}}}
    merged = C.merge_configs(PPO_DEFAULTS, user)
    policies = merged["multiagent"]["policies"]
    assert policies["spec"].config == {"num_sgd_iter": 4} and isinstance(policies["spec"], PolicySpec)
    assert policies["tuple"] == (None, None, None, {"sgd_minibatch_size": 16})
    assert policies["list"] == [None, None, None, {"num_envs_per_worker": 2}]
    assert policies["own"].config == {"num_sgd_iter": 5, "own_key": 1} and policies["bare"] is None
    assert user["multiagent"]["policies"]["spec"].config == {"num_epochs": 4}  # the user's config is unchanged
    dqn = get_trainer_class("DQN")._default_config
    with pytest.raises(ValueError, match="'multiagent.policies.p0.config.num_epochs': it is RLlib 2.x's name of "
                                         "'num_sgd_iter', which this algorithm does not have"):
        C.merge_configs(dqn, {"multiagent": {"policies": {"p0": PolicySpec(config={"num_epochs": 2})}}})
    with pytest.raises(ValueError, match="'multiagent.policies.p0.config.num_learners': 2 cannot be honoured"):
        C.merge_configs(PPO_DEFAULTS, {"multiagent": {"policies": {"p0": PolicySpec(config={"num_learners": 2})}}})
