"""R2D2: the sequence loss against a step-by-step computation, burn-in and stored states,
keys, checkpoints, remote workers, and a memory task DQN cannot learn."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rlfleet.algorithms.r2d2 import DEFAULT_CONFIG, R2D2Trainer, R2D2TorchPolicy, h_function, h_inverse
from rlfleet.config import merge_configs, validate_config
from rlfleet.env.examples import RepeatFirstObsEnv, StatelessCartPole
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.registry import get_trainer_class
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.replay.sequences import SEQ_LOSS_START, replay_sequences
from tests.helpers import load_tuned_example, train_until
from tests.off_policy_helpers import assert_resumes_bit_identically

SB = SampleBatch
OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACT = gym.spaces.Discrete(2)
GAMMA, N_STEP, BURN_IN, SEQ_LEN = 0.9, 2, 2, 3
TINY_MODEL = {"use_lstm": True, "lstm_cell_size": 4, "fcnet_hiddens": [4], "max_seq_len": SEQ_LEN}


def make_policy(zero_init_states: bool) -> R2D2TorchPolicy:
    cfg = merge_configs(DEFAULT_CONFIG, {"seed": 0, "model": TINY_MODEL, "hiddens": [4], "gamma": GAMMA,
                                         "n_step": N_STEP, "replay_burn_in": BURN_IN,
                                         "zero_init_states": zero_init_states})
    validate_config(cfg)
    policy = R2D2TorchPolicy(OBS, ACT, cfg)
    with torch.no_grad():  # a target net that differs from the online one: double Q matters
        for p in policy.model.target_q_net.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    return policy


def step_q(net, obs: np.ndarray, state):
    """Q-values of one row at a time from `state` on: the acting path."""
    out = []
    for row in obs:
        q, state = net({SB.OBS: torch.as_tensor(row[None])}, state, None)
        out.append(q[0])
    return torch.stack(out)


def acted_trajectory(policy, length=8, seed=0) -> SampleBatch:
    """An episode with the state going into each row recorded as the sampler records it."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (length + 1, 2)).astype(np.float32)
    state = [torch.as_tensor(rng.normal(size=(1, 4)).astype(np.float32)) for _ in range(2)]  # mid-memory
    states = []
    with torch.no_grad():
        for row in obs[:-1]:
            states.append([s[0].numpy().copy() for s in state])
            _, state = policy.model.q_net({SB.OBS: torch.as_tensor(row[None])}, state, None)
    return SampleBatch({
        SB.OBS: obs[:-1], SB.NEXT_OBS: obs[1:], SB.ACTIONS: rng.integers(0, 2, length),
        SB.REWARDS: rng.normal(size=length).astype(np.float32), SB.TERMINATEDS: np.arange(length) == length - 1,
        SB.EPS_ID: np.zeros(length, np.int64),
        "state_in_0": np.stack([s[0] for s in states]), "state_in_1": np.stack([s[1] for s in states]),
    })


def sequences(policy) -> SampleBatch:
    seqs = replay_sequences(acted_trajectory(policy), max_seq_len=SEQ_LEN, burn_in=BURN_IN, n_step=N_STEP,
                            gamma=GAMMA, num_states=2)
    seqs[PRIO_WEIGHTS] = np.ones(len(seqs[SB.SEQ_LENS]), np.float32)
    return seqs


def loss_of(policy, seqs):
    loss, stats = policy.loss(policy.model, policy.dist_class, policy.to_tensors(seqs))
    return loss.detach(), stats


def expected_loss(policy, seqs) -> float:
    """The loss row by row: each sequence stepped from its stored state on (the acting path)."""
    eps, total, count = policy.config["h_function_epsilon"], 0.0, 0
    for s in range(len(seqs[SB.SEQ_LENS])):
        state = [torch.as_tensor(seqs[f"state_in_{k}"][s][None]) for k in range(2)]
        with torch.no_grad():
            q = step_q(policy.model.q_net, seqs[SB.OBS][s], state)
            q_target = step_q(policy.model.target_q_net, seqs[SB.OBS][s], state)
        for t in range(int(seqs[SEQ_LOSS_START][s]), int(seqs[SB.SEQ_LENS][s])):
            k = int(seqs[N_STEPS][s, t])
            best = int(q[t + k].argmax())
            bootstrap = 0.0 if seqs[SB.TERMINATEDS][s, t] else GAMMA ** k * h_inverse(q_target[t + k, best], eps)
            target = h_function(torch.as_tensor(seqs[SB.REWARDS][s, t]) + bootstrap, eps)
            total += float(F.huber_loss(q[t, int(seqs[SB.ACTIONS][s, t])], target))
            count += 1
    return total / count


def test_h_function_and_its_inverse():
    x = torch.linspace(-500.0, 500.0, 1001, dtype=torch.float64)
    torch.testing.assert_close(h_inverse(h_function(x, 1e-3), 1e-3), x)
    assert float(h_function(torch.tensor(3.0), 0.0)) == pytest.approx(1.0)  # sqrt(4) - 1


def test_sequence_loss_matches_stepping_row_by_row_from_the_stored_state():
    policy = make_policy(zero_init_states=False)
    seqs = sequences(policy)
    assert seqs[SEQ_LOSS_START].tolist() == [0, 2, 2]  # burn-in exercised
    loss, stats = loss_of(policy, seqs)
    assert float(loss) == pytest.approx(expected_loss(policy, seqs), rel=1e-5)
    assert stats["td_error"].shape == (3,)  # one priority per sequence


def test_burn_in_rows_carry_no_loss_but_warm_the_memory():
    policy = make_policy(zero_init_states=False)
    seqs = sequences(policy)
    base = float(loss_of(policy, seqs)[0])
    burn = np.arange(seqs[SB.ACTIONS].shape[1])[None, :] < seqs[SEQ_LOSS_START][:, None]
    changed = SampleBatch(seqs)
    changed[SB.ACTIONS] = np.where(burn, 1 - seqs[SB.ACTIONS], seqs[SB.ACTIONS])
    changed[SB.REWARDS] = np.where(burn, 100.0, seqs[SB.REWARDS]).astype(np.float32)
    changed[SB.TERMINATEDS] = np.where(burn, True, seqs[SB.TERMINATEDS])
    assert float(loss_of(policy, changed)[0]) == base
    # The burn-in observations do matter: they carry the memory into the trained rows.
    obs = seqs[SB.OBS].copy()
    obs[:, :BURN_IN] += 0.5
    warmed = SampleBatch(seqs, **{SB.OBS: obs})
    warmed[SB.OBS][0, :BURN_IN] = seqs[SB.OBS][0, :BURN_IN]  # sequence 0 has no burn-in rows
    assert float(loss_of(policy, warmed)[0]) != base


@pytest.mark.parametrize("zero_init_states", [False, True])
def test_the_stored_state_is_used_unless_zero_init_states(zero_init_states):
    policy = make_policy(zero_init_states)
    seqs = sequences(policy)
    other = SampleBatch(seqs, state_in_0=seqs["state_in_0"] + 1.0)
    same = float(loss_of(policy, seqs)[0]) == float(loss_of(policy, other)[0])
    assert same == zero_init_states


# --- the trainer -------------------------------------------------------------------------------
TINY = {"seed": 0, "model": dict(TINY_MODEL, lstm_cell_size=8, fcnet_hiddens=[8], max_seq_len=5), "hiddens": [8],
        "learning_starts": 64, "train_batch_size": 40, "timesteps_per_iteration": 100, "min_iter_time_s": 0,
        "replay_burn_in": 3, "n_step": 2, "log_sys_usage": False}


@pytest.mark.parametrize("bad,match", [
    ({"model": {"use_lstm": False}}, "use_lstm"),
    ({"batch_mode": "truncate_episodes"}, "complete_episodes"),
    ({"replay_sequence_length": 40}, "replay_sequence_length"),
    ({"noisy": True}, "noisy"),
    ({"compress_observations": True}, "compress_observations"),
])
def test_settings_it_cannot_serve_are_refused_by_name(bad, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        R2D2Trainer(env=StatelessCartPole, config=dict(TINY, **bad), logdir=str(tmp_path))


def test_prioritized_sequences_and_the_fast_path_report(tmp_path):
    trainer = R2D2Trainer(env=StatelessCartPole, config=dict(TINY, prioritized_replay=True), logdir=str(tmp_path))
    result = trainer.train()
    info = result["info"]["learner"]["default_policy"]
    assert info["fast_path"] == "torch" and "no NumPy learner" in info["fast_path_reason"]
    buffer = trainer.local_replay_buffer
    state = buffer.get_state()
    trained_rows = int((state["data/seq_lens"] - state["data/seq_loss_start"]).sum())
    assert trained_rows == result["timesteps_total"]  # every sampled step is trained in one sequence
    assert len(np.unique(buffer.priorities())) > 2  # priorities came back per sequence
    trainer.stop()


def test_checkpoint_keeps_buffer_and_state_and_resumes_bit_identically(tmp_path):
    config = dict(TINY, store_buffer_in_checkpoints=True, zero_init_states=False, prioritized_replay=True)
    assert_resumes_bit_identically(R2D2Trainer, StatelessCartPole, config, tmp_path)


def test_remote_workers_fill_the_replay(ray_session, tmp_path):
    trainer = R2D2Trainer(env=StatelessCartPole, config=dict(TINY, num_workers=1), logdir=str(tmp_path))
    result = trainer.train()
    assert result["num_healthy_workers"] == 1 and result["info"]["num_agent_steps_trained"] > 0
    trainer.stop()


def test_memory_task_learned_by_r2d2_and_not_by_feed_forward_dqn(tmp_path):
    example = load_tuned_example("r2d2/repeat-first-obs-r2d2.yaml")
    r2d2 = R2D2Trainer(env=RepeatFirstObsEnv, config=example.config, logdir=str(tmp_path / "r2d2"))
    result, history = train_until(r2d2, reward=0.9, max_timesteps=3000)
    r2d2.stop()
    assert result["episode_reward_mean"] >= 0.9, history
    # The same settings without the memory: DQN sees only the last (blank, flagged) observation.
    model = {k: v for k, v in example.config["model"].items() if k not in ("use_lstm", "lstm_cell_size")}
    dqn = get_trainer_class("DQN")(env=RepeatFirstObsEnv, config=dict(example.config, model=model),
                                   logdir=str(tmp_path / "dqn"))
    result, history = train_until(dqn, reward=0.9, max_timesteps=2000)
    dqn.stop()
    assert result["episode_reward_mean"] < 0.7, history


def test_attention_memory_trains(tmp_path):
    model = {"use_lstm": False, "use_attention": True, "attention_dim": 8, "attention_memory_inference": 4,
             "attention_memory_training": 4, "max_seq_len": 5, "fcnet_hiddens": [8]}
    trainer = R2D2Trainer(env=RepeatFirstObsEnv, config=dict(TINY, model=model, zero_init_states=False),
                          logdir=str(tmp_path))
    result = trainer.train()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["loss"])
    assert trainer.local_replay_buffer.get_state()["data/state_in_0"].shape[1:] == (4, 8)  # stored memories
    trainer.stop()
