"""The DDPG / TD3 NumPy learner (rlfleet/algorithms/ddpg/numpy_learner.py) against the
torch path: the same weights, optimizer states, stats and TD errors after many updates on
real Pendulum / MountainCarContinuous transitions (TD3's delayed actor steps included), and
the cases it leaves to torch."""
import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.ddpg import DDPGTrainer
from rlfleet.algorithms.ddpg.numpy_learner import unsupported_reason
from rlfleet.algorithms.td3 import TD3Trainer
from rlfleet.policy.sample_batch import SampleBatch

from tests.helpers import needs_mujoco
from tests.numpy_learner_helpers import (DDPG_SMALL_NETS, assert_numpy_learner_matches, assert_skips_nonfinite_update,
                                          ddpg_policy as _policy, train_side_by_side, transitions as _transitions)

SB = SampleBatch


SMALL = DDPG_SMALL_NETS
CASES = {
    "td3-pendulum": (TD3Trainer, "Pendulum-v1", {**SMALL, "grad_clip": 5.0}),
    "ddpg-pendulum-huber-tanh": (DDPGTrainer, "Pendulum-v1", {
        **SMALL, "use_huber": True, "huber_threshold": 0.5, "actor_hidden_activation": "tanh",
        "critic_hidden_activation": "tanh", "l2_reg": 1e-3}),
    "td3-mountaincar-unnormalized": (TD3Trainer, "MountainCarContinuous-v0", {
        **SMALL, "normalize_actions": False, "l2_reg": 0.0, "policy_delay": 3}),
    "td3-hopper-3d-actions": (TD3Trainer, "Hopper-v5", SMALL),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_learner_ddpg_matches_torch(case):
    trainer_cls, env_id, config = CASES[case]
    needs_mujoco(env_id)
    env = gym.make(env_id)
    fused, plain = _policy(trainer_cls, env, **config), _policy(trainer_cls, env, fast_path="off", **config)
    assert unsupported_reason(fused) is None
    plain.set_weights(fused.get_weights())

    def targets():
        if fused.num_grad_updates % fused.config["policy_delay"] == 0:
            fused.update_target()
            plain.update_target()

    out_f, out_p = train_side_by_side(fused, plain, _transitions(env_id, 512), updates=31, seed=2, after=targets)
    assert_numpy_learner_matches(fused, plain, out_f, out_p, updates=31)


def test_numpy_learner_ddpg_skips_nonfinite_updates():
    env = gym.make("Pendulum-v1")
    policy = _policy(TD3Trainer, env, max_nonfinite_updates=10, **SMALL)
    assert_skips_nonfinite_update(policy, np.inf)


def test_other_ddpg_settings_keep_the_torch_path():
    env = gym.make("Pendulum-v1")
    policy = _policy(TD3Trainer, env, actor_hidden_activation="swish", **{k: v for k, v in SMALL.items()})
    assert "Linear" in unsupported_reason(policy)
    policy.learn_on_batch(_transitions("Pendulum-v1", 32))
    assert policy._numpy_learner is None
    policy = _policy(TD3Trainer, env, optimizer={"weight_decay": 0.1}, **SMALL)
    assert "weight decay" in unsupported_reason(policy)
