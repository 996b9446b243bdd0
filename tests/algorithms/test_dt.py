"""Decision Transformer: returns-to-go and segments against hand computations, the rolling
acting context, learning CartPole (Discrete) from mixed data written with rlfleet's writer,
checkpoint round trip, TorchScript export of the acting step, Ray evaluation workers, and the
errors a user can cause."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.dt import DTTrainer, EpisodeAssembler, SegmentBuffer, returns_to_go
from rlfleet.offline.cartpole_dataset import write_mixed_cartpole_dataset
from rlfleet.offline.pendulum_dataset import write_mixed_pendulum_dataset
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
TINY = {"embed_dim": 16, "num_layers": 1, "num_heads": 2, "model": {"max_seq_len": 4}, "train_batch_size": 64,
        "timesteps_per_iteration": 64, "input_evaluation": [], "log_sys_usage": False, "seed": 0}


def _episode(eps_id: int, n: int, obs_dim: int = 2, start_t: int = 0) -> SampleBatch:
    rewards = np.arange(1, n + 1, dtype=np.float32) * (eps_id + 1)
    return SampleBatch({SB.OBS: np.random.default_rng(eps_id).normal(size=(n, obs_dim)).astype(np.float32),
                        SB.ACTIONS: np.linspace(-1, 1, n, dtype=np.float32)[:, None], SB.REWARDS: rewards,
                        SB.TERMINATEDS: np.arange(n) == n - 1, SB.TRUNCATEDS: np.zeros(n, bool),
                        SB.EPS_ID: np.full(n, eps_id), SB.T: np.arange(start_t, start_t + n)})


@pytest.fixture(scope="module")
def pendulum_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dt") / "pendulum")
    write_mixed_pendulum_dataset(path, episodes=6, expert_fraction=0.5, seed=0, max_episode_steps=40)
    return path


# --- returns-to-go, episodes and segments --------------------------------------------------
def test_returns_to_go_is_the_undiscounted_sum_of_the_rewards_still_to_come():
    rewards = np.array([1.0, -2.0, 0.5, 3.0])
    expected = [sum(rewards[t:]) for t in range(4)]
    np.testing.assert_allclose(returns_to_go(rewards), expected, rtol=1e-6)


def test_assembler_joins_fragments_of_interleaved_episodes():
    a, b = _episode(0, 5), _episode(1, 3)
    assembler = EpisodeAssembler()
    # Lines cut mid-episode, two episodes interleaved: only whole episodes come out.
    assert assembler.add(SampleBatch.concat_samples([a.slice(0, 2), b.slice(0, 1)])) == []
    done = assembler.add(SampleBatch.concat_samples([b.slice(1, 3), a.slice(2, 4)]))
    assert [int(e[SB.EPS_ID][0]) for e in done] == [1]
    np.testing.assert_array_equal(done[0][SB.REWARDS], b[SB.REWARDS])
    done = assembler.add(a.slice(4, 5))
    np.testing.assert_array_equal(done[0][SB.OBS], a[SB.OBS])
    with pytest.raises(ValueError, match="episode ids"):
        assembler.add(SampleBatch({SB.OBS: np.zeros((2, 1)), SB.TERMINATEDS: np.ones(2, bool)}))
    with pytest.raises(ValueError, match="terminateds"):
        assembler.add(SampleBatch({SB.OBS: np.zeros((2, 1)), SB.EPS_ID: np.zeros(2)}))


def test_segments_are_episode_windows_padded_at_the_front():
    k = 4
    buffer = SegmentBuffer(capacity=10, context_length=k, max_ep_len=6, rng=np.random.default_rng(0))
    episode = _episode(0, 7, start_t=0)
    buffer.add(episode)
    rtg = returns_to_go(episode[SB.REWARDS])
    seg = buffer.sample(200)
    assert seg["returns_to_go"].shape == (200, k) and seg[SB.OBS].shape == (200, k, 2)
    seen_lengths = set()
    for row in range(200):
        mask = seg["attention_mask"][row]
        size = int(mask.sum())
        seen_lengths.add(size)
        assert mask.tolist() == [0.0] * (k - size) + [1.0] * size  # padding in front only
        # The real steps are consecutive steps of the episode, their returns-to-go its own.
        t = seg["timesteps"][row, k - size:]
        end = int(np.flatnonzero(rtg == seg["returns_to_go"][row, -1])[0])
        np.testing.assert_array_equal(seg["returns_to_go"][row, k - size:], rtg[end - size + 1:end + 1])
        np.testing.assert_array_equal(t, np.minimum(np.arange(end - size + 1, end + 1), 5))  # clipped to max_ep_len-1
        np.testing.assert_array_equal(seg[SB.OBS][row, k - size:], episode[SB.OBS][end - size + 1:end + 1])
        assert not seg[SB.OBS][row, :k - size].any()
    assert seen_lengths == {1, 2, 3, 4}  # short contexts (an episode's start) are sampled too
    full = SegmentBuffer(capacity=2, context_length=k, max_ep_len=10, rng=np.random.default_rng(0))
    for i in range(5):
        full.add(_episode(i, 3))
    assert len(full) == 2


# --- acting --------------------------------------------------------------------------------
def test_acting_context_starts_at_the_target_and_subtracts_rewards(pendulum_dir, tmp_path):
    trainer = DTTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={
        **TINY, "input": pendulum_dir, "target_return": -150.0})
    policy = trainer.get_policy()
    state = [policy.get_initial_state()[0][None].repeat(2, axis=0)]
    obs = np.zeros((2, 3), np.float32)
    rewards = np.zeros(2, np.float32)
    for step, reward in enumerate([-1.5, -2.0, -0.5, -3.0, -1.0]):
        actions, state, _ = policy.compute_actions(obs + step, state, None, rewards, explore=False)
        ctx = state[0]
        assert ctx[0, -1, 1] == step and ctx[0, -1, 2] == 1.0  # timestep, valid
        np.testing.assert_allclose(ctx[0, -1, 3:6], obs[0] + step)
        np.testing.assert_allclose(ctx[0, -1, 6:], actions[0])  # the action taken is in the context
        assert np.all(np.abs(actions) <= 1.0)
        rewards = np.full(2, reward, np.float32)
    # rtg: target, then minus each reward received; the oldest rows fell out of the K = 4 window.
    np.testing.assert_allclose(state[0][0, :, 0], [-150 + 1.5, -150 + 3.5, -150 + 4.0, -150 + 7.0])
    trainer.stop()


# --- learning --------------------------------------------------------------------------------
def test_dt_learns_cartpole_from_mixed_data_and_reports_its_target(tmp_path):
    data = str(tmp_path / "cartpole")
    write_mixed_cartpole_dataset(data, 30, 0.5, seed=3)
    config = {**TINY, "input": data, "target_return": 100.0, "max_ep_len": 100, "embed_dim": 32,
              "model": {"max_seq_len": 5}, "lr": 1e-3, "grad_clip": None, "train_batch_size": 320,
              "timesteps_per_iteration": 320 * 50, "replay_buffer_config": {"capacity": 30},
              "horizon": 100, "evaluation_num_episodes": 6,
              "evaluation_config": {"input": "sampler", "explore": False},
              "embed_pdrop": 0.0, "resid_pdrop": 0.0, "attn_pdrop": 0.0, "seed": 1}
    trainer = DTTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path / "log"))
    losses = [trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]["action_loss"]
              for _ in range(3)]
    result = trainer.evaluate()["evaluation"]
    assert result["target_return"] == 100.0
    assert losses[-1] < 0.69 * 0.8, losses  # below the cross-entropy of a coin flip
    assert result["episode_reward_mean"] >= 60, result["episode_reward_mean"]  # random play: ~22
    trainer.stop()


# --- checkpoints, export, evaluation workers -------------------------------------------
def test_checkpoint_round_trip_restores_weights_optimizer_and_actions(pendulum_dir, tmp_path):
    config = {**TINY, "input": pendulum_dir, "target_return": -150.0, "max_ep_len": 40}
    trainer = DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "a"), config=config)
    trainer.train()
    path = trainer.save(str(tmp_path / "ckpt"))
    obs = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    before, ctx_before, _ = trainer.get_policy().compute_actions(obs, None, explore=False)
    restored = DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "b"), config=config)
    restored.restore(path)
    after, ctx_after, _ = restored.get_policy().compute_actions(obs, None, explore=False)
    np.testing.assert_allclose(after, before, rtol=1e-6)
    np.testing.assert_allclose(ctx_after[0], ctx_before[0], rtol=1e-6)
    a, b = trainer.get_policy(), restored.get_policy()
    assert b.num_grad_updates == a.num_grad_updates > 0
    opt_a, opt_b = a.optimizers["default"].state_dict(), b.optimizers["default"].state_dict()
    for key, state in opt_a["state"].items():
        np.testing.assert_allclose(opt_b["state"][key]["exp_avg"].numpy(), state["exp_avg"].numpy())
    # Training goes on from the restored state.
    assert restored.train()["info"]["learner"]["default_policy"]["learner_stats"]["action_loss"] > 0
    trainer.stop()
    restored.stop()


def test_export_is_the_acting_step_with_the_context_as_state(pendulum_dir, tmp_path):
    trainer = DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "log"), config={
        **TINY, "input": pendulum_dir, "target_return": -150.0})
    trainer.train()
    path = trainer.export_policy_model(str(tmp_path / "export"))
    model = torch.jit.load(path)
    policy = trainer.get_policy()
    rng = np.random.default_rng(1)
    state = [policy.get_initial_state()[0][None].repeat(2, axis=0)]
    exported_state = torch.as_tensor(state[0])
    rewards = np.zeros(2, np.float32)
    for _ in range(6):
        obs = rng.normal(size=(2, 3)).astype(np.float32)
        raw = [policy.compute_single_action(o, [s], prev_reward=float(r), explore=False)[0]
               for o, s, r in zip(obs, state[0], rewards)]
        actions, state, _ = policy.compute_actions(obs, state, None, rewards, explore=False)
        with torch.no_grad():
            out = model(torch.as_tensor(obs), torch.as_tensor(rewards), exported_state)
        exported_actions, exported_state = out[0], out[-1]
        np.testing.assert_allclose(exported_actions.numpy(), np.stack(raw), rtol=1e-4, atol=1e-5)  # env units
        np.testing.assert_allclose(exported_state.numpy(), state[0], rtol=1e-4, atol=1e-5)
        rewards = rng.normal(size=2).astype(np.float32)
    trainer.stop()


@pytest.mark.slow
def test_evaluation_on_a_ray_worker_reports_the_target(ray_session, pendulum_dir, tmp_path):
    trainer = DTTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={
        **TINY, "input": pendulum_dir, "target_return": -150.0, "evaluation_interval": 1,
        "evaluation_num_workers": 1, "evaluation_num_episodes": 1,
        "evaluation_config": {"input": "sampler", "target_return": -600.0, "explore": False}})
    result = trainer.train()
    assert result["evaluation"]["target_return"] == -600.0
    assert result["evaluation"]["episodes_this_iter"] == 1
    assert np.isfinite(result["evaluation"]["episode_reward_mean"])
    trainer.stop()


# --- errors a user can cause ------------------------------------------------------------
def test_dt_refuses_bad_configs_and_spaces(pendulum_dir, tmp_path):
    base = {**TINY, "input": pendulum_dir}
    with pytest.raises(ValueError, match="target_return"):
        DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "a"), config=base)
    with pytest.raises(ValueError, match="attn_pdrop"):
        DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "b"),
                  config={**base, "target_return": 0.0, "attn_pdrop": 0.2})
    with pytest.raises(ValueError, match="num_heads"):
        DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "c"), config={**base, "target_return": 0.0,
                                                                          "num_heads": 3})
    with pytest.raises(ValueError, match="normalize_actions"):
        DTTrainer(env="Pendulum-v1", logdir=str(tmp_path / "d"), config={**base, "target_return": 0.0,
                                                                          "normalize_actions": False})

    class MultiDiscreteEnv(gym.Env):
        def __init__(self, env_config=None):
            self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
            self.action_space = gym.spaces.MultiDiscrete([2, 3])

    with pytest.raises(ValueError, match="Box and Discrete"):
        DTTrainer(env=MultiDiscreteEnv, logdir=str(tmp_path / "e"),
                  config={**base, "target_return": 0.0})
