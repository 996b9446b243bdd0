"""The NaN guard of learning (rlfleet/policy/nan_guard.py): an update with a non-finite loss or
gradient is skipped (weights and optimizer state untouched), counted in
`info/learner/<pid>/num_nonfinite_updates`, and more than `max_nonfinite_updates` in a row raise."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.policy.nan_guard import NonFiniteUpdateError
from rlfleet.policy.sample_batch import SampleBatch as SB
from rlfleet.policy.torch_policy import optimizer_state
from tests.envs import FaultyEnv

PPO_SMALL = {"num_envs_per_worker": 2, "rollout_fragment_length": 32, "train_batch_size": 64,
             "sgd_minibatch_size": 32, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}, "seed": 3,
             "log_sys_usage": False}
SAC_SMALL = {"Q_model": {"fcnet_hiddens": [16]}, "policy_model": {"fcnet_hiddens": [16]}, "learning_starts": 64,
             "train_batch_size": 32, "timesteps_per_iteration": 100, "min_iter_time_s": 0, "log_sys_usage": False,
             "prioritized_replay": True, "seed": 1}


def weights_of(policy):
    return {k: v.copy() for k, v in policy.get_weights().items()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def assert_finite(weights):
    assert all(np.isfinite(v).all() for v in weights.values())


def test_ppo_skips_counts_then_raises(tmp_path):
    trainer = PPOTrainer(env="CartPole-v1", config=dict(PPO_SMALL, max_nonfinite_updates=2), logdir=str(tmp_path))
    try:
        policy = trainer.get_policy()
        batch = trainer.workers.local_worker().sample()
        bad = batch.copy()
        bad[SB.ADVANTAGES] = bad[SB.ADVANTAGES].copy()
        bad[SB.ADVANTAGES][5] = np.nan
        before, opt_before = weights_of(policy), optimizer_state(policy.optimizer)
        for n in (1, 2):
            result = policy.learn_on_batch(bad)
            assert result["num_nonfinite_updates"] == n
            assert_same(weights_of(policy), before)
        # Adam's moments did not move either.
        opt_after = optimizer_state(policy.optimizer)
        assert opt_after["state"].keys() == opt_before["state"].keys()
        with pytest.raises(NonFiniteUpdateError) as info:
            policy.learn_on_batch(bad)
        message = str(info.value)
        assert "Policy 'default_policy': 3 gradient updates in a row" in message
        assert "'max_nonfinite_updates': 2" in message and "optimizer 'default'" in message
        assert "policy_loss=nan" in message and "total_loss=nan" in message
        assert_same(weights_of(policy), before)
        # A finite batch learns again and ends the streak; the total stays.
        result = policy.learn_on_batch(batch)
        assert result["num_nonfinite_updates"] == 3 and policy.nonfinite_guard.streak == 0
        after = weights_of(policy)
        assert_finite(after)
        assert any(not np.array_equal(after[k], before[k]) for k in after)
    finally:
        trainer.stop()


@pytest.mark.parametrize("grad_clip", [None, 0.5], ids=["foreach_norm", "clip_grad_norm"])
def test_nan_gradient_with_a_finite_loss_is_skipped(tmp_path, grad_clip):
    # The loss is finite, one parameter's gradient is not: found through the gradient norm
    # (the clipping norm when grad_clip is set, else torch._foreach_norm).
    trainer = PPOTrainer(env="CartPole-v1", config=dict(PPO_SMALL, grad_clip=grad_clip, max_nonfinite_updates=0),
                         logdir=str(tmp_path))
    try:
        policy = trainer.get_policy()
        batch = trainer.workers.local_worker().sample()
        param = next(policy.model.parameters())
        handle = param.register_hook(lambda grad: grad * float("nan"))
        before = weights_of(policy)
        with pytest.raises(NonFiniteUpdateError, match="1 gradient updates in a row") as info:
            policy.learn_on_batch(batch)
        assert "optimizer 'default''s gradient is not finite (its loss is" in str(info.value)
        assert_same(weights_of(policy), before)
        handle.remove()
        policy.nonfinite_guard.streak = 0
        policy.learn_on_batch(batch)
        assert any(not np.array_equal(v, before[k]) for k, v in weights_of(policy).items())
    finally:
        trainer.stop()


def test_sac_nan_reward_names_the_critic_and_keeps_all_three_optimizers(tmp_path):
    trainer = SACTrainer(env="Pendulum-v1", config=dict(SAC_SMALL, max_nonfinite_updates=1), logdir=str(tmp_path))
    try:
        trainer.train()
        policy = trainer.get_policy()
        batch = trainer.local_replay_buffer.sample(32, beta=0.4)
        batch[SB.REWARDS] = batch[SB.REWARDS].copy()
        batch[SB.REWARDS][7] = np.nan
        before = weights_of(policy)
        alpha = float(policy.model.log_alpha.detach())
        result = policy.learn_on_batch(batch)
        assert result["num_nonfinite_updates"] == 1
        assert_same(weights_of(policy), before)
        assert float(policy.model.log_alpha.detach()) == alpha
        # The TD errors that go back to the replay priorities stay finite.
        assert np.isfinite(result["td_error"]).all()
        with pytest.raises(NonFiniteUpdateError) as info:
            policy.learn_on_batch(batch)
        message = str(info.value)
        assert "optimizer 'critic'" in message and "critic_loss=nan" in message, message
        assert "optimizer 'actor'" not in message and "optimizer 'alpha'" not in message
        assert_same(weights_of(policy), before)
        # Training goes on with finite batches; the count is reported per policy.
        result = trainer.train()
        assert result["info"]["learner"]["default_policy"]["num_nonfinite_updates"] == 2
        assert_finite(weights_of(policy))
    finally:
        trainer.stop()


def test_nan_rewards_from_an_env_with_checks_off_never_reach_the_weights(tmp_path):
    # End to end: a real env whose 2nd episode has a NaN reward, env checks off after the
    # first episode. PPO standardises the advantages over the batch, so that one reward
    # makes every minibatch NaN: all updates are skipped and the weights stay finite.
    config = dict(PPO_SMALL, disable_env_checking=True, max_nonfinite_updates=1000, num_envs_per_worker=1,
                  env_config={"fault": "nan_reward", "episode": 2, "episode_len": 8})
    trainer = PPOTrainer(env=FaultyEnv, config=config, logdir=str(tmp_path))
    try:
        before = weights_of(trainer.get_policy())
        result = trainer.train()
        skipped = result["info"]["learner"]["default_policy"]["num_nonfinite_updates"]
        assert skipped == 4  # 2 passes of 2 minibatches
        assert_same(weights_of(trainer.get_policy()), before)
    finally:
        trainer.stop()
    # With the default limit (5 in a row) the same run raises, naming the policy.
    trainer = PPOTrainer(env=FaultyEnv, config=dict(config, max_nonfinite_updates=3, num_sgd_iter=4),
                         logdir=str(tmp_path))
    try:
        with pytest.raises(NonFiniteUpdateError, match="Policy 'default_policy': 4 gradient updates in a row"):
            trainer.train()
        assert_finite(weights_of(trainer.get_policy()))
    finally:
        trainer.stop()


def test_max_nonfinite_updates_is_checked():
    with pytest.raises(ValueError, match="max_nonfinite_updates"):
        PPOTrainer(env="CartPole-v1", config={"max_nonfinite_updates": -1})
