"""The SAC NumPy learner (rlfleet/algorithms/sac/numpy_learner.py) against the torch
path: the same weights, optimizer states, stats and TD errors after many updates on real
Pendulum / MountainCarContinuous transitions, and the cases it leaves to torch."""
import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.sac import SACTrainer
from rlfleet.algorithms.sac.numpy_learner import unsupported_reason
from rlfleet.config import validate_config
from rlfleet.policy.sample_batch import SampleBatch

from tests.helpers import needs_mujoco
from tests.numpy_learner_helpers import (assert_numpy_learner_matches, assert_skips_nonfinite_update, sac_policy as _policy,
                                          train_side_by_side, transitions as _transitions)

SB = SampleBatch


CASES = {
    "pendulum-twin": ("Pendulum-v1", {}),
    "pendulum-single-q-clip-tanh": ("Pendulum-v1", {
        "twin_q": False, "grad_clip": 1.0, "policy_model": {"fcnet_hiddens": [32, 16], "fcnet_activation": "tanh"},
        "Q_model": {"fcnet_hiddens": [24], "fcnet_activation": "tanh"}}),
    "mountaincar-unnormalized": ("MountainCarContinuous-v0", {"normalize_actions": False, "initial_alpha": 0.2,
                                                              "target_entropy": -0.5}),
    # Several action dimensions: the log-likelihood and its tanh correction sum over them.
    "hopper-3d-actions": ("Hopper-v5", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_learner_sac_matches_torch(case):
    env_id, overrides = CASES[case]
    needs_mujoco(env_id)
    env = gym.make(env_id)
    config = {"Q_model": {"fcnet_hiddens": [32, 32]}, "policy_model": {"fcnet_hiddens": [32, 32]}, **overrides}
    fused = _policy(env.observation_space, env.action_space, **config)
    plain = _policy(env.observation_space, env.action_space, fast_path="off", **config)
    assert unsupported_reason(fused) is None
    plain.set_weights(fused.get_weights())
    out_f, out_p = train_side_by_side(fused, plain, _transitions(env_id, 512), updates=30, seed=1,
                                      after=lambda: (fused.update_target(), plain.update_target()))
    assert_numpy_learner_matches(fused, plain, out_f, out_p, updates=30)


def test_numpy_learner_sac_skips_nonfinite_updates():
    env = gym.make("Pendulum-v1")
    policy = _policy(env.observation_space, env.action_space, max_nonfinite_updates=10)
    assert_skips_nonfinite_update(policy, np.nan)


def test_other_sac_settings_keep_the_torch_path():
    env = gym.make("CartPole-v1")
    assert "discrete" in unsupported_reason(_policy(env.observation_space, env.action_space))
    env = gym.make("Pendulum-v1")
    policy = _policy(env.observation_space, env.action_space, _deterministic_loss=True)
    assert "_deterministic_loss" in unsupported_reason(policy)
    policy = _policy(env.observation_space, env.action_space, Q_model={"fcnet_activation": "swish"})
    assert "Linear" in unsupported_reason(policy)
    policy.learn_on_batch(_transitions("Pendulum-v1", 32))
    assert policy._numpy_learner is None


def test_more_torch_threads_keep_the_torch_path():
    env = gym.make("Pendulum-v1")
    policy = _policy(env.observation_space, env.action_space)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        policy.learn_on_batch(_transitions("Pendulum-v1", 32))
    finally:
        torch.set_num_threads(before)
    assert policy._numpy_learner is None


def test_numpy_learner_sac_trains_the_state_restored_between_updates():
    """The NumPy learner keeps its views of weights and optimizer states between calls; a state
    restored in between must be the one trained next, whether through `set_state` or straight
    into the modules and optimizers (which keeps the NumPy learner: it must bind again)."""
    data = _transitions("Pendulum-v1", 256)
    env = gym.make("Pendulum-v1")
    policy, direct, fresh = (_policy(env.observation_space, env.action_space) for _ in range(3))
    batch = SampleBatch({k: v[:64] for k, v in data.items()})
    for p in (policy, direct):
        p.learn_on_batch(batch.copy())
    saved = policy.get_state()
    model_state = {k: v.clone() for k, v in direct.model.state_dict().items()}
    optimizer_states = {name: copy.deepcopy(opt.state_dict()) for name, opt in direct.optimizers.items()}
    generator = policy.generator.get_state()
    for p in (policy, direct):
        p.learn_on_batch(batch.copy())  # moves weights and moments away from the saved ones
    policy.set_state(saved)
    fresh.set_state(saved)
    learner = direct._numpy_learner
    direct.model.load_state_dict(model_state)
    for name, opt in direct.optimizers.items():
        opt.load_state_dict(optimizer_states[name])
    for p in (policy, direct, fresh):
        p.generator.set_state(generator)
        p.learn_on_batch(batch.copy())
    assert direct._numpy_learner is learner  # the same learner, bound anew
    for k, v in fresh.get_weights().items():
        np.testing.assert_array_equal(policy.get_weights()[k], v, err_msg=k)
        np.testing.assert_array_equal(direct.get_weights()[k], v, err_msg=k)
