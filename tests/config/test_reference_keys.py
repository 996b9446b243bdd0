"""Issue 26: configs from the reference (RLlib 1.x) carry over: each of its keys is taken with
its meaning or refused with what to write instead."""
from __future__ import annotations

import logging

import pytest

from rlfleet import config as C
from rlfleet.registry import get_trainer_class


def _validate(algo: str, user: dict) -> dict:
    cls = get_trainer_class(algo)
    config = C.merge_configs(cls._default_config, user)
    C.validate_config(config, cls._algo_keys)
    return config


# --- APEX: the reference's replay settings in `optimizer` ------------------------------------
APEX_SMALL = {"min_iter_time_s": 0, "seed": 3, "timesteps_per_iteration": 200, "learning_starts": 200,
              "buffer_size": 10000, "train_batch_size": 32, "rollout_fragment_length": 20, "num_workers": 0,
              "target_network_update_freq": 500, "model": {"fcnet_hiddens": [16]}, "hiddens": [16]}


def test_apex_takes_the_reference_optimizer_entries_as_its_replay_keys(tmp_path):
    from rlfleet.algorithms.apex import ApexTrainer

    trainer = ApexTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
        APEX_SMALL, optimizer={"num_replay_buffer_shards": 2, "max_weight_sync_delay": 100, "debug": False,
                               "eps": 1e-5}))
    try:
        assert trainer.config["num_replay_buffer_shards"] == 2 and len(trainer.shards) == 2
        assert trainer.config["max_weight_sync_delay"] == 100
        assert trainer.config["optimizer"] == {"eps": 1e-5}  # Adam's own entries stay
        trainer.train()
    finally:
        trainer.stop()


@pytest.mark.parametrize("extra,message", [
    ({"optimizer": {"num_replay_buffer_shards": 0}}, "'optimizer.num_replay_buffer_shards': 0 is invalid"),
    ({"optimizer": {"debug": "yes"}}, "'optimizer.debug': 'yes' is invalid"),
    ({"optimizer": {"num_replay_buffer_shards": 2}, "num_replay_buffer_shards": 3},
     "'optimizer.num_replay_buffer_shards': 2 (RLlib 1.x's place for it) and 'num_replay_buffer_shards': 3"),
])
def test_apex_optimizer_entries_are_checked(extra, message, tmp_path):
    from rlfleet.algorithms.apex import ApexTrainer

    with pytest.raises(ValueError) as info:
        ApexTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(APEX_SMALL, **extra))
    assert message in str(info.value)


# --- APPO: lambda (GAE without V-trace) -------------------------------------------------------
def test_appo_takes_lambda_and_uses_it_without_vtrace(monkeypatch, tmp_path):
    from rlfleet.algorithms.appo import APPOTrainer
    from rlfleet.algorithms.appo import appo_policy

    calls = []
    real = appo_policy.postprocess_with_critic
    monkeypatch.setattr(appo_policy, "postprocess_with_critic",
                        lambda policy, batch, gamma, lambda_, use_gae, use_critic: (
                            calls.append((lambda_, use_gae)) or real(policy, batch, gamma, lambda_, use_gae, use_critic)))
    trainer = APPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
        "vtrace": False, "lambda": 0.9, "num_workers": 0, "min_iter_time_s": 0, "train_batch_size": 100,
        "model": {"fcnet_hiddens": [16]}})
    try:
        trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert calls and set(calls) == {(0.9, True)}


def test_appo_lambda_with_vtrace_is_said_to_be_unused(caplog, tmp_path):
    from rlfleet.algorithms.appo import APPOTrainer

    with caplog.at_level(logging.WARNING, logger="rlfleet.algorithms.appo"):
        trainer = APPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
            "lambda": 0.9, "num_workers": 0, "min_iter_time_s": 0, "model": {"fcnet_hiddens": [16]}})
        trainer.stop()
        trainer = APPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
            "lambda": 0.9, "use_critic": False, "num_workers": 0, "model": {"fcnet_hiddens": [16]}})
        trainer.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert any("'lambda': 0.9 is unused with 'vtrace': True" in m for m in messages)
    assert any("'lambda': 0.9 and 'use_critic': False are unused with 'vtrace': True" in m for m in messages)


# --- keys the reference added during 1.x --------------------------------------------------------
def test_evaluation_duration_in_episodes_sets_the_episodes():
    config = _validate("PPO", {"evaluation_duration": 3, "evaluation_duration_unit": "episodes"})
    assert config["evaluation_num_episodes"] == 3


@pytest.mark.parametrize("algo,user,message", [
    ("PPO", {"evaluation_duration": "auto"}, "'evaluation_duration': 'auto' is invalid"),
    ("PPO", {"evaluation_duration_unit": "timesteps"},
     "'evaluation_duration_unit': 'timesteps' is invalid; expected 'episodes'"),
    ("PPO", {"evaluation_duration": 3, "evaluation_num_episodes": 5}, "disagree; set only one of them"),
    ("PPO", {"always_attach_evaluation_results": True}, "'always_attach_evaluation_results': True is not available"),
    ("PPO", {"keep_per_episode_custom_metrics": True}, "'keep_per_episode_custom_metrics': True is not available"),
    ("PPO", {"_disable_preprocessor_api": True}, "'_disable_preprocessor_api': True is not available"),
    ("IMPALA", {"vtrace_drop_last_ts": True}, "'vtrace_drop_last_ts': True is not available"),
    ("APPO", {"vtrace_drop_last_ts": True}, "'vtrace_drop_last_ts': True is not available"),
])
def test_reference_keys_refused_say_what_to_write(algo, user, message):
    with pytest.raises(ValueError) as info:
        _validate(algo, user)
    assert message in str(info.value)


@pytest.mark.parametrize("algo,user", [
    ("PPO", {"always_attach_evaluation_results": False, "keep_per_episode_custom_metrics": False,
             "_disable_preprocessor_api": False, "disable_env_checking": True, "record_env": False}),
    ("IMPALA", {"vtrace_drop_last_ts": False}),
    ("APPO", {"vtrace_drop_last_ts": False, "lambda": 0.95, "use_gae": True}),
])
def test_reference_keys_with_the_meaning_rlfleet_has_are_taken(algo, user):
    _validate(algo, user)
