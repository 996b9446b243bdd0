"""MB-MPO: the dynamics ensemble's fit on real Pendulum data, the reward hook, the imagined
env and rollouts, training, checkpoints, remote workers and export."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.maml.adaptation import model_params
from rlfleet.algorithms.mbmpo import DynamicsEnsemble, ImaginedVectorEnv, MBMPOTrainer, imagine, reward_function
from rlfleet.env.examples.pendulum_with_reward import PendulumWithReward
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.trainer import Trainer

from tests.helpers import assert_export_acts_as_trainer

SB = SampleBatch
PENDULUM = "rlfleet.env.examples.pendulum_with_reward:PendulumWithReward"
# Small everything (the tuned example's settings live in tuned_examples/mbmpo/).
SMALL = {"seed": 1, "num_workers": 0, "rollout_fragment_length": 50, "horizon": 50, "ensemble_size": 2,
         "num_worker_envs": 4, "num_maml_steps": 2, "maml_optimizer_steps": 2, "log_sys_usage": False,
         "dynamics_model": {"model_hiddens": [32, 32], "model_train_epochs": 10},
         "model": {"fcnet_hiddens": [16]}}


def make(tmp_path, **overrides):
    return MBMPOTrainer(config={**SMALL, **overrides}, env=PENDULUM, logdir=str(tmp_path))


def random_transitions(n: int, seed: int = 0):
    env, rng = PendulumWithReward(), np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(n):
        action = rng.uniform(-2.0, 2.0, size=1).astype(np.float32)
        nxt, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, nxt, reward))
        obs = env.reset()[0] if terminated or truncated else nxt
    return [np.array(c, np.float32) for c in zip(*rows)], env


def test_the_reward_function_equals_the_env_rewards():
    (obs, act, nxt, rewards), env = random_transitions(400)
    np.testing.assert_allclose(env.reward(obs, act, nxt), rewards, rtol=1e-5, atol=1e-5)
    # Out-of-range torques are clipped by the env, and by the reward function alike.
    big = np.full_like(act, 7.5)
    env.reset(seed=3)
    state = np.array(env.unwrapped.state)
    _, reward, *_ = env.step(big[0])
    o = np.array([[np.cos(state[0]), np.sin(state[0]), state[1]]], np.float32)
    assert env.reward(o, big[:1], o)[0] == pytest.approx(reward, rel=1e-5)


def test_the_ensemble_fit_lowers_the_validation_loss_on_real_pendulum_data():
    torch.manual_seed(0)
    (obs, act, nxt, _), _ = random_transitions(1500)
    held_out = (obs[1200:], act[1200:], nxt[1200:])
    ensemble = DynamicsEnsemble(3, 1, 2, [32, 32])
    ensemble.set_normalization(obs[:1200], act[:1200], nxt[:1200])
    before = ensemble.validation_loss(*held_out)
    stats = ensemble.fit(obs[:1200], act[:1200], nxt[:1200], lr=3e-3, batch_size=100, train_epochs=30,
                         valid_split_ratio=0.2, patience=5, rng=np.random.default_rng(0))
    after = ensemble.validation_loss(*held_out)
    assert after < 0.2 * before, (before, after)
    assert stats["model_valid_loss"] < 0.2 * before
    # Each member has its own split and stops on its own.
    assert {"model_0_epochs", "model_1_epochs"} <= set(stats)
    # The statistics are buffers: they travel in the state dict.
    assert {"obs_mean", "delta_std"} <= set(ensemble.state_dict())


def test_early_stopping_ends_a_fit_that_stopped_improving():
    (obs, act, nxt, _), _ = random_transitions(300)
    ensemble = DynamicsEnsemble(3, 1, 1, [16])
    stats = ensemble.fit(obs, act, nxt, lr=1e-1, batch_size=300, train_epochs=500, valid_split_ratio=0.3,
                         patience=2, rng=np.random.default_rng(0))
    assert stats["model_epochs"] < 500


def test_an_env_without_the_reward_hook_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"reward\(obs, action, next_obs\)"):
        MBMPOTrainer(config={**SMALL}, env="Pendulum-v1", logdir=str(tmp_path)).stop()
    # A Gymnasium RewardWrapper's reward(reward) is not the hook.
    with pytest.raises(ValueError, match="reward"):
        reward_function(gym.wrappers.TransformReward(gym.make("Pendulum-v1"), lambda r: r))
    assert reward_function(gym.wrappers.TimeLimit(PendulumWithReward(), 10)) is not None


def test_the_imagined_env_steps_one_member_and_scores_with_the_reward_function(tmp_path):
    trainer = make(tmp_path)
    try:
        trainer.train()  # real data and a fitted ensemble
        ens = trainer.ensemble
        starts = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [-1.0, 0.0, -2.0]], np.float32)
        env = ImaginedVectorEnv(ens, 1, trainer._reward_fn, lambda n: starts[:n], 3, 4,
                                *trainer._obs_bounds)
        obs = env.reset()
        actions = np.array([[0.5], [-1.0], [2.0]], np.float32)
        nxt, rewards, done = env.step(actions)
        want = ens.predict(torch.as_tensor(obs), torch.as_tensor(actions), 1).detach().numpy()
        np.testing.assert_allclose(nxt, np.clip(want, -np.array([1, 1, 8]), np.array([1, 1, 8])), rtol=1e-6)
        np.testing.assert_allclose(rewards, trainer._env.reward(starts, actions, nxt), rtol=1e-6)
        assert not done
        for _ in range(3):
            *_, done = env.step(actions)
        assert done
        policy = trainer.get_policy()
        batch, returns = imagine(policy, {k: v.detach() for k, v in model_params(policy.model).items()}, env,
                                 gamma=0.9, lambda_=1.0, normalize_actions=True, clip_actions=False)
        assert batch.count == 12 and returns.shape == (3,)
        assert np.all(np.isfinite(batch[SB.VALUE_TARGETS])) and abs(float(np.mean(batch[SB.ADVANTAGES]))) < 1e-4
        np.testing.assert_allclose(batch[SB.REWARDS].reshape(4, 3).sum(0), returns, rtol=1e-5)
        with pytest.raises(ValueError, match="member 2"):
            ImaginedVectorEnv(ens, 2, trainer._reward_fn, lambda n: starts[:n], 3, 4)
    finally:
        trainer.stop()


def test_train_samples_real_data_fits_the_ensemble_and_meta_updates(tmp_path):
    trainer = make(tmp_path)
    try:
        before = trainer.get_policy().get_weights()
        r1 = trainer.train()
        r2 = trainer.train()
        assert r1["timesteps_total"] == 50 and r2["timesteps_total"] == 100
        assert len(trainer.store) == 100
        stats = r2["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["model_valid_loss"]) and np.isfinite(stats["total_loss"])
        for key in ("imagined_reward_mean_adapt_0", "imagined_reward_mean_adapt_1",
                    "MAMLIter1_DynaTrajInner_1_episode_reward_mean"):
            assert np.isfinite(r2[key]), key
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in after)
    finally:
        trainer.stop()


def test_checkpoint_round_trip_keeps_the_ensemble_and_its_statistics(tmp_path):
    trainer = make(tmp_path / "a")
    try:
        trainer.train()
        want_state = {k: v.clone() for k, v in trainer.ensemble.state_dict().items()}
        # The run goes on exactly as one resumed from the checkpoint would (same env seeds).
        path = trainer.save(str(tmp_path / "ckpt"), continue_from_checkpoint=True)
        want = trainer.train()
    finally:
        trainer.stop()
    restored = Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    try:
        assert isinstance(restored, MBMPOTrainer) and restored.iteration == 1
        for k, v in restored.ensemble.state_dict().items():
            torch.testing.assert_close(v, want_state[k])
        assert float(restored.ensemble.delta_std.min()) != 1.0  # statistics, not the initial ones
        assert len(restored.store) == 50
        got = restored.train()
    finally:
        restored.stop()
    assert got["timesteps_total"] == want["timesteps_total"]
    for key in ("model_valid_loss", "total_loss"):
        assert got["info"]["learner"]["default_policy"]["learner_stats"][key] == pytest.approx(
            want["info"]["learner"]["default_policy"]["learner_stats"][key], rel=1e-4), key
    assert got["imagined_reward_mean_adapt_1"] == pytest.approx(want["imagined_reward_mean_adapt_1"], rel=1e-5)


def test_the_exported_policy_acts_as_the_trainer(tmp_path):
    trainer = make(tmp_path / "run")
    try:
        assert_export_acts_as_trainer(trainer, tmp_path / "export", obs_dim=3)
    finally:
        trainer.stop()


def test_remote_workers_sample_real_data_with_adapted_policies(tmp_path, ray_session):
    trainer = make(tmp_path, num_workers=2)
    try:
        trainer.train()
        result = trainer.train()  # the second iteration's workers sample adapted policies
        assert result["num_healthy_workers"] == 2
        assert result["timesteps_total"] == 2 * 2 * 50
        assert len(trainer.store) == 200
        after = trainer.get_policy().get_weights()
        for weights in trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())[1:]:
            for k, v in after.items():
                np.testing.assert_array_equal(weights[k], v)  # meta weights back after sampling
    finally:
        trainer.stop()


@pytest.mark.parametrize("overrides,match", [
    ({"model": {"use_lstm": True}}, "recurrent"),
    ({"horizon": None}, "horizon"),
    ({"ensemble_size": 0}, "ensemble_size"),
])
def test_unsupported_settings_are_refused_naming_the_key(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        make(tmp_path, **overrides).stop()
