"""Sequence replay (replay/sequences.py): how trajectories become stored sequences (burn-in,
overlap, stored states, n-step lookahead), and the R2D2 priority mix."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PrioritizedReplayBuffer
from rlfleet.replay.sequences import SEQ_LOSS_START, loss_mask, replay_sequences, sequence_priorities

SB = SampleBatch


def trajectories(lengths, terminated_last=True):
    """Rows of consecutive episodes; obs = 10 * episode + step (new_obs the next one), the
    state going into each row its global row number, reward 1 per step."""
    eps = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])
    step = np.concatenate([np.arange(n) for n in lengths])
    obs = (10 * eps + step).astype(np.float32)[:, None]
    last = np.concatenate([np.arange(n) == n - 1 for n in lengths])
    total = len(eps)
    return SampleBatch({
        SB.OBS: obs, SB.NEXT_OBS: obs + 1, SB.ACTIONS: step % 2, SB.REWARDS: np.ones(total, np.float32),
        SB.TERMINATEDS: last & terminated_last, SB.TRUNCATEDS: last & (not terminated_last),
        SB.EPS_ID: eps, "state_in_0": np.arange(total, dtype=np.float32)[:, None].repeat(3, 1),
    })


def test_windows_overlap_by_the_burn_in_and_keep_the_state_of_their_first_row():
    seqs = replay_sequences(trajectories([7]), max_seq_len=3, burn_in=2, n_step=1, gamma=0.9, num_states=1)
    # Windows [0,3) [3,6) [6,7); each sequence starts burn_in rows earlier where it can.
    np.testing.assert_array_equal(seqs[SEQ_LOSS_START], [0, 2, 2])
    np.testing.assert_array_equal(seqs[SB.SEQ_LENS], [3, 5, 3])
    np.testing.assert_array_equal(seqs["state_in_0"][:, 0], [0, 1, 4])  # the state going into row 0, 1, 4
    # Observations run one past the last row (the bootstrap), zero-padded to B + m + n = 6.
    np.testing.assert_array_equal(seqs[SB.OBS][:, :, 0], [[0, 1, 2, 3, 0, 0], [1, 2, 3, 4, 5, 6],
                                                          [4, 5, 6, 7, 0, 0]])
    # Every row is trained exactly once over the sequences.
    mask = loss_mask(seqs[SB.SEQ_LENS], seqs[SEQ_LOSS_START], 5)
    trained = np.concatenate([seqs[SB.OBS][s, :5, 0][mask[s]] for s in range(3)])
    np.testing.assert_array_equal(trained, np.arange(7))


def test_episodes_never_share_a_sequence_and_the_final_observation_is_kept():
    seqs = replay_sequences(trajectories([2, 4], terminated_last=False), max_seq_len=4, burn_in=0, n_step=1,
                            gamma=0.9, num_states=1)
    np.testing.assert_array_equal(seqs[SB.SEQ_LENS], [2, 4])
    np.testing.assert_array_equal(seqs[SB.OBS][:, :, 0], [[0, 1, 2, 0, 0], [10, 11, 12, 13, 14]])
    assert not seqs[SB.TERMINATEDS].any()  # truncated: the targets bootstrap from the final obs


def test_n_step_rows_bootstrap_from_an_observation_inside_the_sequence():
    n, gamma = 3, 0.5
    seqs = replay_sequences(trajectories([8]), max_seq_len=4, burn_in=1, n_step=n, gamma=gamma, num_states=1)
    for s in range(len(seqs)):
        for t in range(int(seqs[SEQ_LOSS_START][s]), int(seqs[SB.SEQ_LENS][s])):
            k = int(seqs[N_STEPS][s, t])
            row = int(seqs[SB.OBS][s, t, 0])  # global step of this row
            # The n-step observation sits k rows on, in the same sequence.
            assert seqs[SB.OBS][s, t + k, 0] == row + k
            assert k == min(n, 8 - row)
            assert seqs[SB.REWARDS][s, t] == pytest.approx(sum(gamma ** i for i in range(k)))
            assert bool(seqs[SB.TERMINATEDS][s, t]) == (row + k == 8)


def test_recorded_previous_actions_and_rewards_follow_the_observations():
    batch = trajectories([3])
    batch[SB.PREV_ACTIONS] = np.array([0, 0, 1])
    batch[SB.PREV_REWARDS] = np.array([0.0, 1.0, 1.0], np.float32)
    seqs = replay_sequences(batch, max_seq_len=3, burn_in=0, n_step=1, gamma=0.9, num_states=1,
                            stream_columns=(SB.OBS, SB.PREV_ACTIONS, SB.PREV_REWARDS))
    np.testing.assert_array_equal(seqs[SB.PREV_ACTIONS][0], [0, 0, 1, 0])  # the last action follows
    np.testing.assert_array_equal(seqs[SB.PREV_REWARDS][0], [0, 1, 1, 1])


def test_missing_state_columns_are_named():
    batch = trajectories([3])
    del batch["state_in_0"]
    with pytest.raises(ValueError, match="state_in_0"):
        replay_sequences(batch, max_seq_len=3, burn_in=0, n_step=1, gamma=0.9, num_states=1)


def test_priority_mix_is_eta_max_plus_one_minus_eta_mean_over_trained_rows():
    errors = np.array([[9.0, 1.0, 2.0, 3.0], [5.0, -4.0, 0.0, 7.0]])
    mask = loss_mask(np.array([4, 3]), np.array([1, 0]), 4)  # drops the 9 (burn-in) and the 7 (padding)
    got = sequence_priorities(errors, mask, eta=0.9)
    np.testing.assert_allclose(got, [0.9 * 3 + 0.1 * 2, 0.9 * 5 + 0.1 * 3])


def test_sequences_are_rows_of_the_prioritized_buffer():
    seqs = replay_sequences(trajectories([7, 5]), max_seq_len=3, burn_in=2, n_step=1, gamma=0.9, num_states=1)
    buffer = PrioritizedReplayBuffer(10, alpha=1.0, seed=0)
    buffer.add(seqs)
    assert len(buffer) == 5  # capacity and size count sequences
    buffer.update_priorities(np.arange(5), np.array([1e-6, 1e-6, 1e-6, 1e-6, 1.0]))
    sampled = buffer.sample(50, beta=0.4)
    assert (sampled["batch_indexes"] == 4).mean() > 0.9
    assert sampled[SB.OBS].shape == (50, 6, 1) and sampled["state_in_0"].shape == (50, 3)
