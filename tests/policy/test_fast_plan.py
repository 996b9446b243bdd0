"""The fast path plan (rlfleet/policy/fast_plan.py): one selection per policy, the
`fast_path` key, and its report in every train() result."""
from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.policy import fast_plan
from rlfleet.policy.fast_plan import FastPathPlan, key_fallback_reason
from tests.algorithm_cases import SUPPORTED_ACTION_SPACES, TINY_CONFIGS, build
from tests.numpy_learner_helpers import dqn_policy, sac_policy, transitions as _transitions

BASE = {"num_workers": 0, "seed": 3, "num_envs_per_worker": 2, "rollout_fragment_length": 64,
        "train_batch_size": 128, "sgd_minibatch_size": 64, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]}}


def test_every_result_reports_each_policys_fast_path():
    trainer = PPOTrainer(env="CartPole-v1", config=BASE)
    try:
        info = trainer.train()["info"]["learner"]["default_policy"]
        assert info["fast_path"] == "numpy" and "same update" in info["fast_path_reason"]
        assert info["fast_path_actor"] == "numpy"
        assert trainer.get_policy()._numpy_learner is not None
    finally:
        trainer.stop()
    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "fast_path": "off"})
    try:
        info = trainer.train()["info"]["learner"]["default_policy"]
        assert (info["fast_path"], info["fast_path_reason"]) == ("torch", "fast_path is 'off'")
        assert info["fast_path_actor"] == "torch" and trainer.get_policy().numpy_actor_reason() == "fast_path is 'off'"
        assert trainer.get_policy()._numpy_learner is None
    finally:
        trainer.stop()


def test_a_loss_key_the_numpy_learner_does_not_compute_falls_back_with_its_name():
    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "use_critic": False, "use_gae": False})
    try:
        info = trainer.train()["info"]["learner"]["default_policy"]
        assert info["fast_path"] == "torch" and "use_critic=False" in info["fast_path_reason"]
    finally:
        trainer.stop()
    assert key_fallback_reason("DQN", {"num_atoms": 51}).startswith("num_atoms=51")
    assert key_fallback_reason("SAC", {"_deterministic_loss": False, "model": {"use_lstm": True}}).startswith(
        "model.use_lstm=True")
    assert key_fallback_reason("PPO", {"use_critic": True}) is None


def test_require_raises_naming_the_key_and_the_reason():
    env = gym.make("Pendulum-v1")
    policy = sac_policy(env.observation_space, env.action_space, fast_path="require", _deterministic_loss=True)
    with pytest.raises(ValueError, match=r"fast_path='require'.*_deterministic_loss"):
        policy.learn_on_batch(_transitions("Pendulum-v1", 16))
    policy = sac_policy(env.observation_space, env.action_space, fast_path="require")
    policy.learn_on_batch(_transitions("Pendulum-v1", 16))
    assert policy.fast_plan.learner == "numpy"


def test_the_plan_is_computed_once_and_again_after_a_structural_change(monkeypatch):
    env = gym.make("CartPole-v1")
    policy = dqn_policy(env, model={"fcnet_hiddens": [16]}, hiddens=[8])
    calls = []
    original = fast_plan.numpy_learner_reason
    monkeypatch.setattr(fast_plan, "numpy_learner_reason", lambda p: calls.append(1) or original(p))
    batch = _transitions("CartPole-v1", 32)
    for _ in range(3):
        policy.learn_on_batch(batch.copy())
    assert len(calls) == 1 and isinstance(policy.fast_plan, FastPathPlan)
    policy.set_weights(policy.get_weights())
    policy.learn_on_batch(batch.copy())
    assert len(calls) == 2
    # One thread rule for every algorithm: more torch threads, the torch learner.
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        policy.refresh_fast_plan()
        assert policy.fast_plan.learner == "torch" and "2 threads" in policy.fast_plan.learner_reason
    finally:
        torch.set_num_threads(before)


def test_a_numpy_learner_serves_exactly_the_class_that_names_it(monkeypatch):
    """The one exact-type check and dispatch (rlfleet/policy/numpy_learner.py)."""
    from rlfleet.algorithms.dqn.dqn_policy import DQNTorchPolicy
    from rlfleet.algorithms.dqn.numpy_learner import DQNNumpyLearner
    from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy
    from rlfleet.policy.numpy_learner import (LEARN_ON_BATCH, MULTI_EPOCH_SGD, declared_numpy_learner,
                                              numpy_learner_reason, planned_numpy_learner)

    class ChangedLoss(DQNTorchPolicy):
        pass

    class SameLoss(DQNTorchPolicy):
        numpy_learner = DQNNumpyLearner

    assert declared_numpy_learner(DQNTorchPolicy) is DQNNumpyLearner
    assert declared_numpy_learner(ChangedLoss) is None and declared_numpy_learner(SameLoss) is DQNNumpyLearner
    assert declared_numpy_learner(PPOTorchPolicy).replaces == MULTI_EPOCH_SGD
    env = gym.make("CartPole-v1")
    policy = dqn_policy(env, model={"fcnet_hiddens": [16]}, hiddens=[8])
    assert numpy_learner_reason(policy) is None
    learner = planned_numpy_learner(policy, LEARN_ON_BATCH)
    assert isinstance(learner, DQNNumpyLearner) and planned_numpy_learner(policy, LEARN_ON_BATCH) is learner
    assert planned_numpy_learner(policy, MULTI_EPOCH_SGD) is None  # DQN's learner replaces learn_on_batch only
    for cls, served in ((ChangedLoss, False), (SameLoss, True)):
        monkeypatch.setattr(policy, "__class__", cls)
        policy.refresh_fast_plan()
        assert (numpy_learner_reason(policy) is None) is served
        assert (planned_numpy_learner(policy, LEARN_ON_BATCH) is not None) is served
    monkeypatch.setattr(policy, "__class__", ChangedLoss)
    assert numpy_learner_reason(policy) == "the policy class is ChangedLoss, not DQNTorchPolicy"


def test_an_unknown_fast_path_value_is_rejected():
    from rlfleet.config import validate_config

    with pytest.raises(Exception, match="fast_path"):
        validate_config(PPOTrainer.merge_trainer_configs(PPOTrainer._default_config, {"fast_path": "fast"}))


# --- fast_path "off" and "require" on every algorithm ---------------------------------------
from rlfleet.policy.numpy_learner import declared_numpy_learner  # noqa: E402
from rlfleet.registry import get_trainer_class, list_algorithms  # noqa: E402
from tests.algorithm_cases import SUPPORTED_ACTION_SPACES, build  # noqa: E402

# The algorithms whose policy class names a NumPy learner (`numpy_learner`).
NUMPY_LEARNERS = {name for name in list_algorithms()
                  if declared_numpy_learner(get_trainer_class(name)._policy_class) is not None}
# DD-PPO learns on remote workers only; QMIX needs a grouped env and SlateQ a slate env (their fast-path
# reports: tests/algorithms/test_qmix.py, tests/algorithms/test_slateq.py).
LOCAL_ALGORITHMS = sorted(set(SUPPORTED_ACTION_SPACES) - {"DDPPO", "QMIX", "SlateQ"})
# NumPy all the way, no torch path: "off" is refused, "require" is met.
NUMPY_ONLY = {"BanditLinUCB", "BanditLinTS", "ES", "ARS"}


def _space(algo: str) -> str:
    return "Box" if "Box" in SUPPORTED_ACTION_SPACES[algo] and algo in ("SAC", "CQL") else (
        "Discrete" if "Discrete" in SUPPORTED_ACTION_SPACES[algo] else "Box")


def _learned_result(trainer) -> dict:
    result = trainer.train()
    # The asynchronous learners (IMPALA, APPO) learn in a thread: give them a few more.
    while not result["info"]["learner"] and result["training_iteration"] < 20:
        result = trainer.train()
    return result["info"]["learner"]["default_policy"]


@pytest.mark.parametrize("algo", LOCAL_ALGORITHMS)
def test_fast_path_off_runs_torch_on_every_algorithm_and_says_so(algo, tmp_path, monkeypatch):
    monkeypatch.setitem(TINY_CONFIGS, algo, {**TINY_CONFIGS[algo], "fast_path": "off"})
    if algo in NUMPY_ONLY:
        with pytest.raises(ValueError, match=r"fast_path='off' asks for torch, but .* NumPy only"):
            build(algo, _space(algo), str(tmp_path)).stop()
        return
    trainer = build(algo, _space(algo), str(tmp_path))
    try:
        info = _learned_result(trainer)
        assert (info["fast_path"], info["fast_path_reason"]) == ("torch", "fast_path is 'off'")
        assert info["fast_path_actor"] == "torch"
    finally:
        trainer.stop()


@pytest.mark.parametrize("algo", LOCAL_ALGORITHMS)
def test_fast_path_require_takes_the_numpy_learner_or_fails_when_built(algo, tmp_path, monkeypatch):
    monkeypatch.setitem(TINY_CONFIGS, algo, {**TINY_CONFIGS[algo], "fast_path": "require"})
    if algo not in NUMPY_LEARNERS | NUMPY_ONLY:
        with pytest.raises(ValueError, match=r"fast_path='require', but the NumPy learner cannot serve"):
            build(algo, _space(algo), str(tmp_path)).stop()
        return
    trainer = build(algo, _space(algo), str(tmp_path))
    try:
        info = _learned_result(trainer)
        assert info["fast_path"] == "numpy", info["fast_path_reason"]
    finally:
        trainer.stop()
