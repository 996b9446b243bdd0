"""Attention nets (`use_attention`, GTrXL): memory carried as state, acting vs. learning views,
the previous actions / rewards, config errors, and learning a memory task."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import MODEL_DEFAULTS
from rlfleet.env.examples import RepeatFirstObsEnv
from rlfleet.models.attention import AttentionWrapper, GRUGate
from rlfleet.models.catalog import ModelCatalog
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
SMALL = {"use_attention": True, "attention_dim": 16, "attention_head_dim": 8, "attention_num_heads": 2,
         "attention_position_wise_mlp_dim": 16, "attention_memory_inference": 4, "attention_memory_training": 4,
         "fcnet_hiddens": [16], "max_seq_len": 5}


def _model(**overrides) -> AttentionWrapper:
    obs_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    model = ModelCatalog.get_model(obs_space, gym.spaces.Discrete(3), 3, {**MODEL_DEFAULTS, **SMALL, **overrides})
    assert isinstance(model, AttentionWrapper)
    return model


def test_memory_state_shapes_and_shift():
    model = _model(attention_num_transformer_units=2, vf_share_layers=True)
    init = model.get_initial_state()
    assert [tuple(s.shape) for s in init] == [(4, 16), (4, 16)]
    # With a separate critic the value transformer carries its own memories after the policy's.
    assert len(_model(attention_num_transformer_units=2, vf_share_layers=False).get_initial_state()) == 4
    obs = torch.randn(2, 3)
    state = [torch.randn(2, 4, 16) for _ in init]
    _, state_out = model({SB.OBS: obs}, state, None)
    # One step shifts the memory by one: the oldest slot drops out, the step's block input comes in.
    for before, after in zip(state, state_out):
        torch.testing.assert_close(after[:, :-1], before[:, 1:])
        assert not torch.allclose(after[:, -1], before[:, -1])


def test_a_sequence_pass_matches_step_by_step_acting_with_prev_actions_and_rewards():
    model = _model(attention_num_transformer_units=2, attention_use_n_prev_actions=2,
                   attention_use_n_prev_rewards=3, vf_share_layers=False)
    assert model.uses_prev_actions and model.uses_prev_rewards
    init = model.get_initial_state()
    # 2 blocks x (policy, value) memories, then 1 older action (one-hot of 3) and 2 older rewards.
    assert [tuple(s.shape) for s in init] == [(4, 16)] * 4 + [(1, 3), (2,)]
    rng = np.random.default_rng(0)
    steps = 7  # longer than the memory: the window slides
    obs = torch.as_tensor(rng.normal(size=(steps, 3)), dtype=torch.float32)
    prev_a = torch.as_tensor(rng.integers(0, 3, steps))
    prev_r = torch.as_tensor(rng.normal(size=steps), dtype=torch.float32)
    state = [s[None] for s in init]
    logits, values = [], []
    with torch.no_grad():
        for t in range(steps):
            out, state = model({SB.OBS: obs[t:t + 1], SB.PREV_ACTIONS: prev_a[t:t + 1],
                                SB.PREV_REWARDS: prev_r[t:t + 1]}, state, None)
            logits.append(out)
            values.append(model.value_function())
        seq_out, _ = model({SB.OBS: obs, SB.PREV_ACTIONS: prev_a, SB.PREV_REWARDS: prev_r},
                           [s[None] for s in init], torch.tensor([steps]))
    torch.testing.assert_close(seq_out, torch.cat(logits), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.value_function(), torch.cat(values), rtol=1e-5, atol=1e-5)
    # The actions two steps back matter (they ride in the state).
    with torch.no_grad():
        other = prev_a.clone()
        other[0] = (other[0] + 1) % 3
        changed, _ = model({SB.OBS: obs, SB.PREV_ACTIONS: other, SB.PREV_REWARDS: prev_r},
                           [s[None] for s in init], torch.tensor([steps]))
    assert not torch.allclose(changed[1], seq_out[1])


def test_gru_gate_starts_near_the_identity():
    gate = GRUGate(8, init_bias=2.0)
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    open_gate = GRUGate(8, init_bias=-2.0)
    open_gate.load_state_dict({**gate.state_dict(), "bias": torch.full((8,), -2.0)})
    assert (gate(x, y) - x).abs().mean() < (open_gate(x, y) - x).abs().mean()


def test_compute_single_action_threads_the_memory_and_the_sampler_records_it():
    trainer = PPOTrainer(env=RepeatFirstObsEnv, config={
        "seed": 2, "num_envs_per_worker": 2, "rollout_fragment_length": 10, "train_batch_size": 20,
        "sgd_minibatch_size": 10, "num_sgd_iter": 1,
        "model": {**SMALL, "attention_use_n_prev_actions": 1, "attention_use_n_prev_rewards": 1}})
    try:
        policy = trainer.get_policy()
        assert policy.is_recurrent() and policy.view_columns == [SB.PREV_ACTIONS, SB.PREV_REWARDS]
        state = policy.get_initial_state()
        assert [s.shape for s in state] == [(4, 16), (4, 16)]  # policy and critic memories
        obs = RepeatFirstObsEnv().reset(seed=0)[0]
        action, state_out, extra = trainer.compute_single_action(obs, state=state, prev_action=0, prev_reward=0.0)
        assert policy.action_space.contains(action) and [s.shape for s in state_out] == [(4, 16), (4, 16)]
        np.testing.assert_array_equal(state_out[0][:-1], state[0][1:])
        batch = trainer.workers.local_worker().sample()
        assert batch["state_in_0"].shape == (20, 4, 16) and batch["state_in_1"].shape == (20, 4, 16)
        result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    finally:
        trainer.stop()


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="use_lstm.*use_attention"):
        _model(use_lstm=True)
    with pytest.raises(ValueError, match="attention_dim"):
        PPOTrainer(env=RepeatFirstObsEnv, config={"model": {"use_attention": True, "attention_dim": 0}})
    from rlfleet.algorithms.dqn import DQNTrainer

    with pytest.raises(ValueError, match="'model.use_attention': True is not supported by DQNTorchPolicy"):
        DQNTrainer(env=RepeatFirstObsEnv, config={"model": {"use_attention": True}})


@pytest.mark.slow
def test_ppo_with_attention_learns_a_memory_task():
    # The token shown at the first step must be named at the fifth; memoryless play scores 0.5
    # (the same task and settings as the LSTM's test in tests/policy/test_recurrent.py).
    trainer = PPOTrainer(env=RepeatFirstObsEnv, config={
        "seed": 0, "num_envs_per_worker": 8, "rollout_fragment_length": 25,
        "train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 8, "lr": 3e-3, "kl_coeff": 0.0,
        "lambda": 0.95, "model": {"use_attention": True, "attention_dim": 32, "attention_memory_inference": 10,
                                  "attention_memory_training": 10, "fcnet_hiddens": [32], "max_seq_len": 10}})
    try:
        for _ in range(12):
            result = trainer.train()
        assert result["episode_reward_mean"] >= 0.9, result["episode_reward_mean"]
    finally:
        trainer.stop()
