"""The DQN NumPy learner (rlfleet/algorithms/dqn/numpy_learner.py) against the torch
path: the same weights, optimizer state, stats and TD errors after many updates on real
CartPole / Acrobot transitions (dueling or not, double Q or not), and the cases it leaves
to torch."""
import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.dqn.numpy_learner import unsupported_reason
from rlfleet.config import validate_config

from tests.numpy_learner_helpers import (assert_numpy_learner_matches, assert_skips_nonfinite_update, dqn_policy as _policy,
                                          train_side_by_side, transitions as _transitions)


CASES = {
    "cartpole-defaults": ("CartPole-v1", {"model": {"fcnet_hiddens": [32, 32]}, "hiddens": [16]}),
    "cartpole-zoo-plain": ("CartPole-v1", {"model": {"fcnet_hiddens": [32, 32], "fcnet_activation": "relu"},
                                           "dueling": False, "double_q": False, "hiddens": [], "grad_clip": 10}),
    "acrobot-dueling-no-trunk": ("Acrobot-v1", {"model": {"fcnet_hiddens": []}, "hiddens": [24], "grad_clip": None,
                                               "lr": 1e-3}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_learner_dqn_matches_torch(case):
    env_id, config = CASES[case]
    env = gym.make(env_id)
    fused, plain = _policy(env, **config), _policy(env, fast_path="off", **config)
    assert unsupported_reason(fused) is None
    plain.set_weights(fused.get_weights())
    updates = 0

    def targets():
        nonlocal updates
        updates += 1
        if updates % 10 == 0:
            fused.update_target()
            plain.update_target()

    out_f, out_p = train_side_by_side(fused, plain, _transitions(env_id, 512), updates=30, seed=3, after=targets)
    assert_numpy_learner_matches(fused, plain, out_f, out_p, updates=30)


def test_numpy_learner_dqn_skips_nonfinite_updates():
    policy = _policy(gym.make("CartPole-v1"), max_nonfinite_updates=10, model={"fcnet_hiddens": [16]})
    assert_skips_nonfinite_update(policy, np.nan, env_id="CartPole-v1")


def test_other_dqn_settings_keep_the_torch_path():
    env = gym.make("CartPole-v1")
    for config, why in (({"num_atoms": 11}, "distributional"), ({"noisy": True}, "noisy"),
                        ({"model": {"fcnet_activation": "swish"}}, "Linear")):
        policy = _policy(env, **config)
        assert why in unsupported_reason(policy)
    policy.learn_on_batch(_transitions("CartPole-v1", 32))
    assert policy._numpy_learner is None
