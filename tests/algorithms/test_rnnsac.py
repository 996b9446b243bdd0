"""RNNSAC: the sequence losses against a row-by-row computation, burn-in and stored states (Box
and Discrete), keys, checkpoints."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.rnnsac import DEFAULT_CONFIG, RNNSACTorchPolicy, RNNSACTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.config import merge_configs, validate_config
from rlfleet.env.examples import StatelessPendulum
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.replay.sequences import SEQ_LOSS_START, replay_sequences
from tests.off_policy_helpers import assert_resumes_bit_identically

SB = SampleBatch
OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
SPACES = {"Discrete": gym.spaces.Discrete(3), "Box": gym.spaces.Box(-2.0, 2.0, (1,), np.float32)}
GAMMA, N_STEP, BURN_IN, SEQ_LEN, CELL = 0.9, 2, 2, 3, 4
NET = {"fcnet_hiddens": [4], "lstm_cell_size": CELL}


def make_policy(space: str, zero_init_states: bool = False) -> RNNSACTorchPolicy:
    cfg = merge_configs(DEFAULT_CONFIG, {"seed": 0, "model": {"max_seq_len": SEQ_LEN}, "policy_model": NET,
                                         "Q_model": NET, "gamma": GAMMA, "n_step": N_STEP, "replay_burn_in": BURN_IN,
                                         "zero_init_states": zero_init_states, "_deterministic_loss": True})
    validate_config(cfg)
    return RNNSACTorchPolicy(OBS, SPACES[space], cfg)


def sequences(policy, length=8, seed=0) -> SampleBatch:
    """One acted episode (actor state recorded per row) as replay sequences."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (length + 1, 2)).astype(np.float32)
    state = [rng.normal(size=(1, CELL)).astype(np.float32) for _ in range(2)]  # a mid-episode memory
    states = []
    for row in obs[:-1]:
        states.append([s[0] for s in state])
        _, state, _ = policy.compute_actions(row[None], state)
    space = policy.action_space
    actions = (rng.integers(0, space.n, length) if isinstance(space, gym.spaces.Discrete)
               else rng.uniform(-1, 1, (length, 1)).astype(np.float32))
    batch = SampleBatch({
        SB.OBS: obs[:-1], SB.NEXT_OBS: obs[1:], SB.ACTIONS: actions,
        SB.REWARDS: rng.normal(size=length).astype(np.float32), SB.TERMINATEDS: np.arange(length) == length - 1,
        SB.EPS_ID: np.zeros(length, np.int64),
        "state_in_0": np.stack([s[0] for s in states]), "state_in_1": np.stack([s[1] for s in states]),
    })
    seqs = replay_sequences(batch, max_seq_len=SEQ_LEN, burn_in=BURN_IN, n_step=N_STEP, gamma=GAMMA, num_states=2)
    seqs[PRIO_WEIGHTS] = np.ones(len(seqs[SB.SEQ_LENS]), np.float32)
    return seqs


def losses_of(policy, seqs):
    losses, stats = policy.loss(policy.model, policy.dist_class, policy.to_tensors(seqs))
    return {k: float(v.detach()) for k, v in losses.items()}, stats


def stepped(net, obs_rows: np.ndarray, state):
    """`net`'s outputs one row at a time from `state` (the acting path)."""
    out = []
    for row in obs_rows:
        o, state = net({SB.OBS: torch.as_tensor(row[None])}, state, None)
        out.append(o[0])
    return torch.stack(out)


def expected_critic_loss(policy, seqs) -> float:
    """The discrete critic loss row by row: the actor stepped from its stored state, the critics
    from zeros (twin Q: the sum of both nets' halved squared errors)."""
    model, cfg = policy.model, policy.config
    total, count = 0.0, 0
    with torch.no_grad():
        alpha = float(torch.exp(model.log_alpha))
        for s in range(len(seqs[SB.SEQ_LENS])):
            obs = seqs[SB.OBS][s]
            logits = stepped(model.policy_net, obs, [torch.as_tensor(seqs[f"state_in_{k}"][s][None]) for k in (0, 1)])
            log_pi = torch.log_softmax(logits, -1)
            qs = [net.q(stepped(net, obs, [])) for net in (model.q_net, model.twin_q_net)]
            q_next = torch.min(*[net.q(stepped(net, obs, [])) for net in (model.target_q_net,
                                                                             model.target_twin_q_net)])
            v = (log_pi.exp() * (q_next - alpha * log_pi)).sum(-1)
            for t in range(int(seqs[SEQ_LOSS_START][s]), int(seqs[SB.SEQ_LENS][s])):
                k = int(seqs[N_STEPS][s, t])
                y = seqs[SB.REWARDS][s, t] + (0.0 if seqs[SB.TERMINATEDS][s, t] else cfg["gamma"] ** k * float(v[t + k]))
                a = int(seqs[SB.ACTIONS][s, t])
                total += sum(0.5 * (float(q[t, a]) - y) ** 2 for q in qs)
                count += 1
    return total / count


def test_discrete_critic_loss_matches_stepping_row_by_row():
    policy = make_policy("Discrete")
    seqs = sequences(policy)
    assert seqs[SEQ_LOSS_START].tolist() == [0, 2, 2]  # burn-in exercised
    losses, stats = losses_of(policy, seqs)
    assert losses["critic"] == pytest.approx(expected_critic_loss(policy, seqs), rel=1e-5)
    assert stats["td_error"].shape == (3,)


@pytest.mark.parametrize("space", sorted(SPACES))
def test_burn_in_rows_carry_no_loss_and_the_stored_actor_state_is_used(space):
    policy = make_policy(space)
    seqs = sequences(policy)
    base, _ = losses_of(policy, seqs)
    burn = np.arange(seqs[SB.REWARDS].shape[1])[None, :] < seqs[SEQ_LOSS_START][:, None]
    changed = SampleBatch(seqs)
    changed[SB.REWARDS] = np.where(burn, 100.0, seqs[SB.REWARDS]).astype(np.float32)
    changed[SB.TERMINATEDS] = np.where(burn, True, seqs[SB.TERMINATEDS])
    changed[SB.ACTIONS] = np.where(burn.reshape(*burn.shape, *([1] * (seqs[SB.ACTIONS].ndim - 2))),
                                   np.zeros_like(seqs[SB.ACTIONS]), seqs[SB.ACTIONS])
    assert losses_of(policy, changed)[0] == base
    # The stored state reaches the actor's loss (not the critics', which start from zeros).
    other, _ = losses_of(policy, SampleBatch(seqs, state_in_0=seqs["state_in_0"] + 1.0))
    assert other["actor"] != base["actor"] and other["critic"] != base["critic"]  # targets use the actor too
    zero = make_policy(space, zero_init_states=True)
    assert losses_of(zero, SampleBatch(seqs, state_in_0=seqs["state_in_0"] + 1.0))[0] == losses_of(zero, seqs)[0]


@pytest.mark.parametrize("bad,match", [
    ({"model": {"use_lstm": True}}, "model.use_lstm"),
    ({"policy_model": {"use_lstm": False}}, "use_lstm"),
    ({"batch_mode": "truncate_episodes"}, "complete_episodes"),
])
def test_settings_it_cannot_serve_are_refused_by_name(bad, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        RNNSACTrainer(env=StatelessPendulum, config=bad, logdir=str(tmp_path))


TINY = {"seed": 0, "model": {"max_seq_len": 5}, "policy_model": {"fcnet_hiddens": [8], "lstm_cell_size": 8},
        "Q_model": {"fcnet_hiddens": [8], "lstm_cell_size": 8, "lstm_use_prev_action": True},
        "learning_starts": 64, "train_batch_size": 40, "timesteps_per_iteration": 100, "min_iter_time_s": 0,
        "replay_burn_in": 3, "log_sys_usage": False, "store_buffer_in_checkpoints": True, "zero_init_states": False,
        "prioritized_replay": True, "env_config": {"max_episode_steps": 30}}


def test_checkpoint_resumes_bit_identically(tmp_path):
    # Box actions (Discrete ones take the same path: tests/algorithms/test_algorithm_smoke.py trains both).
    result = assert_resumes_bit_identically(RNNSACTrainer, StatelessPendulum, TINY, tmp_path)
    assert result["info"]["learner"]["default_policy"]["fast_path_reason"] == "RNNSACTorchPolicy has no NumPy learner"


@pytest.mark.parametrize("fragment, envs", [(1, 1), (4, 2)])
def test_default_update_rate_counts_env_steps_as_sacs_does(fragment, envs, tmp_path):
    """`training_intensity` None: RNNSAC's fragments are whole episodes (30 steps per env here), yet
    it replays as many batches, and rows, per sampled env step as SAC with the same fragment size:
    one update per `rollout_fragment_length * num_envs_per_worker` steps (SAC's default: one per step)."""
    common = {"seed": 0, "learning_starts": 0, "train_batch_size": 40, "rollout_fragment_length": fragment,
              "num_envs_per_worker": envs, "timesteps_per_iteration": 120, "min_iter_time_s": 0,
              "log_sys_usage": False, "env_config": {"max_episode_steps": 30}}
    small = {"fcnet_hiddens": [8], "lstm_cell_size": 8}
    rates = {}
    for trainer_class, config in [(SACTrainer, {"policy_model": {"fcnet_hiddens": [8]},
                                                "Q_model": {"fcnet_hiddens": [8]}}),
                                  (RNNSACTrainer, {"model": {"max_seq_len": 5}, "policy_model": small,
                                                   "Q_model": small})]:
        trainer = trainer_class(env=StatelessPendulum, config={**common, **config}, logdir=str(tmp_path))
        try:
            while trainer.counters["num_env_steps_sampled"] < 120:
                trainer.train()
            c = trainer.counters
            sampled, updates = c["num_env_steps_sampled"], c["num_env_steps_trained"] // 40
            assert sampled == 120, trainer_class  # whole episodes and whole fragments meet at 120
            rates[trainer_class._name] = (updates / sampled, c["num_agent_steps_trained"] / sampled)
        finally:
            trainer.stop()
    # 8 sequences of 5 rows replay RNNSAC's 40 steps per update, SAC's 40 transitions.
    assert rates["RNNSAC"] == rates["SAC"] == (1 / (fragment * envs), 40 / (fragment * envs)), rates
