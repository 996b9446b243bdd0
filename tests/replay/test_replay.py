"""Replay: segment trees, uniform and prioritized buffers, n-step transitions, state."""
from __future__ import annotations

import io

import numpy as np
import pytest

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import (
    BATCH_INDEXES, N_STEPS, PRIO_WEIGHTS, MinTree, PrioritizedReplayBuffer, ReplayBuffer, SumTree,
    n_step_transitions,
)

SB = SampleBatch
# 99.9% quantiles of chi-square with 6 and 7 degrees of freedom.
CHI2_6_999 = 22.46
CHI2_7_999 = 24.32


def rows(start, n):
    return SampleBatch({"x": np.arange(start, start + n, dtype=np.float32),
                        "v": np.arange(start, start + n, dtype=np.int64).repeat(2).reshape(n, 2)})


# --- segment trees -----------------------------------------------------------------------------
def test_sum_tree_sampling_is_proportional_to_priorities():
    rng = np.random.default_rng(0)
    prios = np.array([1.0, 2.0, 0.5, 4.0, 0.0, 3.0, 1.5, 8.0])
    tree = SumTree(len(prios))
    tree[np.arange(len(prios))] = prios
    n = 200_000
    idx = tree.find_prefixsum_idx(rng.random(n) * tree.sum())
    counts = np.bincount(idx, minlength=len(prios))
    assert counts[4] == 0  # zero priority: never drawn
    expected = n * prios / prios.sum()
    nz = prios > 0
    chi2 = (((counts[nz] - expected[nz]) ** 2) / expected[nz]).sum()
    assert chi2 < CHI2_6_999  # 7 categories drawn from: 6 degrees of freedom


def test_sum_tree_prefix_sum_boundaries():
    tree = SumTree(5)  # rounded up to 8 leaves
    assert tree.capacity == 8
    tree[np.arange(5)] = [1.0, 2.0, 3.0, 4.0, 0.0]
    assert tree.sum() == 10.0
    got = tree.find_prefixsum_idx(np.array([0.0, 0.999, 1.0, 2.999, 3.0, 5.999, 6.0, 9.999]))
    np.testing.assert_array_equal(got, [0, 0, 1, 1, 2, 2, 3, 3])
    # Rounding at the top of the range never lands on an empty leaf.
    assert tree.find_prefixsum_idx(np.array([10.0]))[0] == 3


def test_trees_match_numpy_after_random_vectorised_updates():
    rng = np.random.default_rng(1)
    size = 37
    ref = np.zeros(size)
    s, m = SumTree(size), MinTree(size)
    ref_min = np.full(size, np.inf)
    for _ in range(50):
        idx = rng.integers(0, size, 10)  # with repeats: the last write wins
        vals = rng.random(10)
        s[idx] = vals
        m[idx] = vals
        for i, v in zip(idx, vals):
            ref[i] = v
            ref_min[i] = v
        assert s.sum() == pytest.approx(ref.sum())
        assert m.min() == pytest.approx(ref_min.min())
    np.testing.assert_allclose(s.leaves(size), ref)
    np.testing.assert_allclose(s[np.arange(size)], ref)


def test_min_tree_empty_is_inf_and_set_leaves_rebuilds():
    m = MinTree(6)
    assert m.min() == np.inf
    m.set_leaves(np.array([3.0, 2.0, 5.0]))
    assert m.min() == 2.0
    m[1] = 7.0
    assert m.min() == 3.0


# --- uniform ring buffer -------------------------------------------------------------------------
def test_ring_buffer_wraps_around_oldest_first():
    buf = ReplayBuffer(5, seed=0)
    buf.add(rows(0, 3))
    assert len(buf) == 3
    slots = buf.add(rows(3, 4))  # 3, 4 fill slots 3, 4; 5, 6 overwrite slots 0, 1
    np.testing.assert_array_equal(slots, [3, 4, 0, 1])
    assert len(buf) == 5 and buf._next == 2
    np.testing.assert_array_equal(buf._storage["x"], [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(buf._storage["v"][:, 1], [5, 6, 2, 3, 4])
    # A batch larger than the buffer keeps its last `capacity` rows.
    buf.add(rows(10, 7))
    assert sorted(buf._storage["x"].tolist()) == [12, 13, 14, 15, 16]
    assert buf.num_added == 14


def test_uniform_sample_draws_only_stored_rows():
    buf = ReplayBuffer(100, seed=0)
    buf.add(rows(0, 10))
    out = buf.sample(1000)
    assert out.count == 1000
    assert set(out["x"].astype(int)) == set(range(10))
    np.testing.assert_array_equal(out["x"], out[BATCH_INDEXES])
    np.testing.assert_array_equal(out[PRIO_WEIGHTS], 1.0)


def test_buffer_rejects_mismatched_columns_and_empty_sampling():
    buf = ReplayBuffer(4)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1)
    buf.add(rows(0, 2))
    with pytest.raises(ValueError, match="columns"):
        buf.add(SampleBatch({"x": np.zeros(2, np.float32)}))
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0)


# --- prioritized -------------------------------------------------------------------------------
def test_prioritized_sampling_follows_priority_to_the_alpha():
    buf = PrioritizedReplayBuffer(8, alpha=0.5, seed=3)
    buf.add(rows(0, 8))
    prios = np.array([1.0, 4.0, 9.0, 16.0, 1.0, 4.0, 9.0, 16.0])
    buf.update_priorities(np.arange(8), prios)
    n = 100_000
    counts = np.bincount(buf.sample(n, beta=0.4)[BATCH_INDEXES], minlength=8)
    expected = n * prios ** 0.5 / (prios ** 0.5).sum()
    chi2 = (((counts - expected) ** 2) / expected).sum()
    assert chi2 < CHI2_7_999


def test_importance_weights_match_numpy():
    alpha, beta = 0.6, 0.7
    buf = PrioritizedReplayBuffer(16, alpha=alpha, seed=0)
    buf.add(rows(0, 10))
    prios = np.linspace(0.1, 3.0, 10)
    buf.update_priorities(np.arange(10), prios)
    out = buf.sample(64, beta=beta)
    p = prios ** alpha / (prios ** alpha).sum()
    expected = (10 * p[out[BATCH_INDEXES]]) ** -beta / (10 * p.min()) ** -beta
    np.testing.assert_allclose(out[PRIO_WEIGHTS], expected, rtol=1e-5)
    assert out[PRIO_WEIGHTS].max() <= 1.0 + 1e-6


def test_new_transitions_get_the_max_priority_and_updates_validate():
    buf = PrioritizedReplayBuffer(8, alpha=1.0, seed=0)
    buf.add(rows(0, 2))
    np.testing.assert_allclose(buf.priorities(), [1.0, 1.0])
    buf.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    buf.add(rows(2, 1))
    np.testing.assert_allclose(buf.priorities(), [5.0, 0.5, 5.0])
    with pytest.raises(ValueError, match="> 0"):
        buf.update_priorities(np.array([0]), np.array([0.0]))
    with pytest.raises(IndexError):
        buf.update_priorities(np.array([5]), np.array([1.0]))
    # Overwritten slots take the max priority again.
    buf.add(rows(3, 8))
    assert len(buf) == 8
    np.testing.assert_allclose(buf.priorities(), 5.0)


# --- n-step --------------------------------------------------------------------------------------
def fragment():
    """Episode 1: 4 steps, terminated. Episode 2: 3 steps, truncated (time limit).
    Episode 3: 2 steps, still running when the fragment ends."""
    eps = [1, 1, 1, 1, 2, 2, 2, 3, 3]
    rewards = [1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 5.0, 6.0]
    term = [0, 0, 0, 1, 0, 0, 0, 0, 0]
    trunc = [0, 0, 0, 0, 0, 0, 1, 0, 0]
    n = len(eps)
    return SampleBatch({
        SB.OBS: np.arange(n, dtype=np.float32)[:, None],
        SB.NEXT_OBS: np.arange(1, n + 1, dtype=np.float32)[:, None] + 100,
        SB.ACTIONS: np.arange(n) % 2,
        SB.REWARDS: np.array(rewards, np.float32),
        SB.TERMINATEDS: np.array(term, bool),
        SB.TRUNCATEDS: np.array(trunc, bool),
        SB.DONES: np.array(term, bool) | np.array(trunc, bool),
        SB.EPS_ID: np.array(eps),
    })


def test_n_step_against_a_hand_computed_trajectory():
    g = 0.9
    out = n_step_transitions(fragment(), 3, g)
    # Rewards: sum over up to 3 steps, never across an episode end.
    expected_rewards = [
        1 + g * 2 + g * g * 3, 2 + g * 3 + g * g * 4, 3 + g * 4, 4,      # episode 1
        10 + g * 20 + g * g * 30, 20 + g * 30, 30,                       # episode 2
        5 + g * 6, 6,                                                    # episode 3
    ]
    np.testing.assert_allclose(out[SB.REWARDS], expected_rewards, rtol=1e-6)
    np.testing.assert_array_equal(out[N_STEPS], [3, 3, 2, 1, 3, 2, 1, 2, 1])
    # Bootstrap observation: new_obs of the window's last row (101..109 for rows 0..8).
    np.testing.assert_array_equal(out[SB.NEXT_OBS][:, 0], [103, 104, 104, 104, 107, 107, 107, 109, 109])
    # Terminated episode: no bootstrap for any window reaching its end; truncated: bootstrap.
    np.testing.assert_array_equal(out[SB.TERMINATEDS], [0, 1, 1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(out[SB.OBS][:, 0], np.arange(9))
    np.testing.assert_array_equal(out[SB.ACTIONS], np.arange(9) % 2)


def test_n_step_1_is_the_identity_with_one_step_counts():
    batch = fragment()
    out = n_step_transitions(batch, 1, 0.99)
    for col in (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS):
        np.testing.assert_array_equal(out[col], batch[col])
    np.testing.assert_array_equal(out[N_STEPS], 1)


def test_n_step_target_equals_the_discounted_return_when_bootstrapping():
    # With Q = 0 the n-step target is the reward column; with Q(s') = c it adds
    # gamma^k * c exactly where the episode was not terminated.
    g, c = 0.5, 8.0
    out = n_step_transitions(fragment(), 2, g)
    target = out[SB.REWARDS] + g ** out[N_STEPS] * (1 - out[SB.TERMINATEDS]) * c
    assert target[2] == pytest.approx(3 + g * 4)           # ends in the terminal step
    assert target[5] == pytest.approx(20 + g * 30 + g ** 2 * c)  # truncated: bootstraps
    assert target[8] == pytest.approx(6 + g * c)           # fragment end: 1 step, gamma^1


# --- state --------------------------------------------------------------------------------------
@pytest.mark.parametrize("prioritized", [False, True])
def test_buffer_state_round_trips_through_npz_without_pickle(prioritized):
    make = (lambda: PrioritizedReplayBuffer(6, alpha=0.7, seed=5)) if prioritized else (lambda: ReplayBuffer(6, seed=5))
    buf = make()
    buf.add(rows(0, 4))
    buf.add(rows(4, 4))  # wrapped
    if prioritized:
        buf.update_priorities(np.arange(6), np.arange(1, 7, dtype=float))
    buf.sample(3)
    state = buf.get_state()
    arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
    scalars = {k: v for k, v in state.items() if not isinstance(v, np.ndarray)}
    import json
    json.dumps(scalars)  # JSON-serialisable
    f = io.BytesIO()
    np.savez(f, **arrays)
    f.seek(0)
    loaded = dict(np.load(f, allow_pickle=False))
    other = make()
    other.set_state({**json.loads(json.dumps(scalars)), **loaded})
    assert len(other) == len(buf) and other._next == buf._next
    for key in buf._storage:
        np.testing.assert_array_equal(other._storage[key], buf._storage[key])
    a, b = buf.sample(20), other.sample(20)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    if prioritized:
        np.testing.assert_allclose(other.priorities(), buf.priorities())
        assert other._min.min() == pytest.approx(buf._min.min())


def test_set_state_rejects_another_capacity():
    buf = ReplayBuffer(4)
    buf.add(rows(0, 2))
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(8).set_state(buf.get_state())
