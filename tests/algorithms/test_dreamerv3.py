"""DreamerV3: its maths against NumPy, the world model learning on real CartPole sequences with
finite imagination returns, checkpoint round trip (replay included), export of the acting step,
refusals, and sampling on Ray workers. Learning to CartPole's 450 runs in benchmarks/dreamerv3.py."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.dreamerv3 import DreamerV3Trainer
from rlfleet.algorithms.dreamerv3.losses import ReturnNormalizer, bins, lambda_returns, symexp, symlog, two_hot
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.registry import get_trainer_class

# Small and fast: a tiny model on short sequences, one update per 4 sampled steps.
TINY = {"model_size": "nano", "num_latents": 4, "num_classes": 4, "batch_size": 4, "batch_length": 8,
        "learning_starts": 64, "training_ratio": 8, "timesteps_per_iteration": 64, "seed": 0, "log_sys_usage": False}


def test_symlog_two_hot_and_lambda_returns_match_numpy():
    x = torch.tensor([-1000.0, -1.5, 0.0, 0.3, 42.0])
    np.testing.assert_allclose(symlog(x).numpy(), np.sign(x.numpy()) * np.log1p(np.abs(x.numpy())), rtol=1e-6)
    np.testing.assert_allclose(symexp(symlog(x)).numpy(), x.numpy(), rtol=1e-4)
    centres = bins()
    y = torch.tensor([0.0, 0.05, -3.3, 25.0])
    enc = two_hot(y, centres)
    np.testing.assert_allclose(enc.sum(-1).numpy(), 1.0, rtol=1e-6)
    np.testing.assert_allclose((enc * centres).sum(-1).numpy(), [0.0, 0.05, -3.3, 20.0], atol=1e-5)  # 25 clipped
    assert int((enc > 0).sum(-1).max()) <= 2
    rng = np.random.default_rng(0)
    rewards, values, cont = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), np.full((3, 2), 0.5)
    gamma, lam = 0.9, 0.8
    want, last = np.zeros((3, 2)), values[-1]
    for t in reversed(range(3)):
        last = rewards[t] + gamma * cont[t] * ((1 - lam) * values[t + 1] + lam * last)
        want[t] = last
    got = lambda_returns(torch.as_tensor(rewards), torch.as_tensor(values), torch.as_tensor(cont), gamma, lam)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    norm = ReturnNormalizer(decay=0.5)
    r = torch.arange(101.0)
    assert float(norm.update(r)) == pytest.approx(90.0)  # 95th - 5th percentile
    assert float(norm.update(r * 0)) == pytest.approx(45.0)
    assert float(norm.update(r * 0 + 3)) == pytest.approx(22.5)


def test_world_model_loss_falls_and_imagination_returns_are_finite(tmp_path):
    trainer = DreamerV3Trainer(env="CartPole-v1", logdir=str(tmp_path), config={**TINY, "timesteps_per_iteration": 150})
    try:
        losses, result = [], None
        for _ in range(4):
            result = trainer.train()
            stats = result["info"]["learner"][DEFAULT_POLICY_ID]["learner_stats"]
            losses.append(stats["world_model_loss"])
            assert math.isfinite(stats["imagined_return_mean"]) and math.isfinite(stats["actor_loss"])
        assert losses[-1] < 0.9 * losses[0], losses  # measured: 6.5 -> 5.4 over 4 iterations
        info = result["info"]["learner"][DEFAULT_POLICY_ID]
        assert info["fast_path"] == "torch" and "NumPy learner" in info["fast_path_reason"]
        assert result["num_env_steps_trained"] > 0
    finally:
        trainer.stop()


def test_checkpoint_round_trip_restores_networks_optimizers_and_replay(tmp_path):
    config = {**TINY, "store_buffer_in_checkpoints": True}
    trainer = DreamerV3Trainer(env="Pendulum-v1", logdir=str(tmp_path / "a"), config=config)
    try:
        for _ in range(2):
            trainer.train()
        path = trainer.save(str(tmp_path / "ckpt"))
        policy = trainer.get_policy()
        weights, opt = policy.get_weights(), policy.get_state()["optimizers"]
        replay = len(trainer.local_replay_buffer)
    finally:
        trainer.stop()
    restored = DreamerV3Trainer(env="Pendulum-v1", logdir=str(tmp_path / "b"), config=config)
    try:
        restored.restore(path)
        policy = restored.get_policy()
        for k, v in policy.get_weights().items():
            np.testing.assert_array_equal(v, weights[k], err_msg=k)
        assert sorted(policy.get_state()["optimizers"]) == sorted(opt) == ["actor", "critic", "world_model"]
        assert len(restored.local_replay_buffer) == replay > 0
        obs = np.zeros(3, np.float32)
        state = policy.get_initial_state()
        action, state_out, _ = restored.compute_single_action(obs, state=state, explore=False)
        assert action.shape == (1,) and len(state_out) == 3
        restored.train()  # learning resumes
    finally:
        restored.stop()


def test_export_of_the_acting_step_matches_the_policy(tmp_path):
    trainer = DreamerV3Trainer(env="CartPole-v1", logdir=str(tmp_path), config=TINY)
    try:
        policy = trainer.get_policy()
        path = policy.export_model(str(tmp_path / "ts"))
        scripted = torch.jit.load(path)
        obs = torch.as_tensor(np.random.default_rng(0).normal(size=(3, 4)), dtype=torch.float32)
        state = [torch.as_tensor(np.repeat(s[None], 3, 0)) for s in policy.get_initial_state()]
        got = scripted(obs, *state)
        actions, state_out, _ = policy.compute_actions(obs.numpy(), [s.numpy() for s in state], explore=False)
        np.testing.assert_array_equal(got[0].detach().numpy(), actions)
        np.testing.assert_allclose(got[1].detach().numpy(), state_out[0], atol=1e-5)
        onnx_path = policy.export_model(str(tmp_path / "onnx"), onnx=17)
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(onnx_path)
        out = session.run(None, dict(zip(["obs", "h", "z", "prev_action"], [obs.numpy()] + [s.numpy() for s in state])))
        np.testing.assert_array_equal(out[0], actions)
        np.testing.assert_allclose(out[1], state_out[0], atol=1e-4)
    finally:
        trainer.stop()


@pytest.mark.parametrize("obs_space,action_space,match", [
    (gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiDiscrete([2, 3]), "Discrete or a 1-D Box action space"),
    (gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (3,))}), gym.spaces.Discrete(2), "Box observation space"),
    (gym.spaces.Box(0, 255, (30, 30, 3), np.uint8), gym.spaces.Discrete(2), "divisible by 16"),
])
def test_unsupported_spaces_are_refused_with_the_fix(obs_space, action_space, match):
    from rlfleet.algorithms.dreamerv3 import DreamerV3TorchPolicy

    from rlfleet.algorithms.dreamerv3.dreamerv3 import DEFAULT_CONFIG
    from rlfleet.config import merge_configs

    config = merge_configs(DEFAULT_CONFIG, TINY)
    with pytest.raises(ValueError, match=match):
        DreamerV3TorchPolicy(obs_space, action_space, config)


def test_images_go_through_the_cnn():
    from rlfleet.algorithms.dreamerv3.actor_critic import DreamerV3Model
    from rlfleet.algorithms.dreamerv3.dreamerv3 import DEFAULT_CONFIG
    from rlfleet.algorithms.dreamerv3.dreamerv3_policy import world_model_loss
    from rlfleet.config import merge_configs

    config = merge_configs(DEFAULT_CONFIG, TINY)
    model = DreamerV3Model(gym.spaces.Box(0, 255, (16, 16, 3), np.uint8), gym.spaces.Discrete(2), config)
    batch = {"obs": torch.randint(0, 255, (2, 5, 16, 16, 3), dtype=torch.uint8),
             "actions": torch.randint(0, 2, (2, 4)), "rewards": torch.ones(2, 4), "terminateds": torch.zeros(2, 4),
             "seq_lens": torch.tensor([4, 2])}
    loss, starts, stats = world_model_loss(model, batch, config)
    loss.backward()
    assert math.isfinite(float(loss.detach())) and starts["h"].shape[0] == 5 + 3
    assert model.world_model.encoder.net[0].weight.grad is not None


def test_dreamer_alias_trains_v3_with_a_note(tmp_path, caplog):
    trainer = get_trainer_class("Dreamer")(env="CartPole-v1", logdir=str(tmp_path), config=TINY)
    try:
        assert isinstance(trainer, DreamerV3Trainer)
        assert "trains DreamerV3" in caplog.text
    finally:
        trainer.stop()


@pytest.mark.slow
def test_two_remote_workers_sample_for_the_learner(tmp_path, ray_session):
    trainer = DreamerV3Trainer(env="CartPole-v1", logdir=str(tmp_path), config={**TINY, "num_workers": 2})
    try:
        result = trainer.train()
        result = trainer.train()
        assert result["num_env_steps_trained"] > 0 and result["episodes_total"] > 0
        assert trainer.workers.num_remote_workers() == 2
    finally:
        trainer.stop()
