"""Discounting and GAE (rlfleet.rollout.postprocessing) against hand-computed numbers and a
plain NumPy reference loop (one trajectory at a time, the textbook recursion)."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import (
    bootstrap_values,
    compute_advantages,
    segmented_discounted_cumsum,
    standardized,
    trajectory_ends,
)

SB = SampleBatch


# --- NumPy reference: the recursions written out, one trajectory at a time ---------------
def _segments(eps_id):
    bounds = [0] + [i + 1 for i in range(len(eps_id) - 1) if eps_id[i] != eps_id[i + 1]] + [len(eps_id)]
    return list(zip(bounds[:-1], bounds[1:]))


def ref_gae(rewards, vf, eps_id, bootstrap, gamma, lam):
    adv = np.zeros(len(rewards))
    for lo, hi in _segments(eps_id):
        gae = 0.0
        for t in range(hi - 1, lo - 1, -1):
            next_v = vf[t + 1] if t + 1 < hi else bootstrap[hi - 1]
            delta = rewards[t] + gamma * next_v - vf[t]
            gae = delta + gamma * lam * gae
            adv[t] = gae
    return adv, adv + np.asarray(vf)


def ref_returns(rewards, eps_id, bootstrap, gamma):
    ret = np.zeros(len(rewards))
    for lo, hi in _segments(eps_id):
        acc = bootstrap[hi - 1]
        for t in range(hi - 1, lo - 1, -1):
            acc = rewards[t] + gamma * acc
            ret[t] = acc
    return ret


def _batch(rewards, eps_id, vf=None):
    cols = {SB.REWARDS: np.asarray(rewards, np.float32), SB.EPS_ID: np.asarray(eps_id, np.int64)}
    if vf is not None:
        cols[SB.VF_PREDS] = np.asarray(vf, np.float32)
    return SampleBatch(cols)


# --- hand-computed two-step example -------------------------------------------------------
# rewards [1, 2], V = [0.5, 1.0], bootstrap V(s_2) = 2, gamma 0.9, lambda 0.8:
#   delta_1 = 2 + 0.9 * 2.0 - 1.0 = 2.8
#   delta_0 = 1 + 0.9 * 1.0 - 0.5 = 1.4
#   A_1 = 2.8;  A_0 = 1.4 + 0.9 * 0.8 * 2.8 = 3.416
#   targets = A + V = [3.916, 3.8]
# Without GAE: R_1 = 2 + 0.9 * 2 = 3.8; R_0 = 1 + 0.9 * 3.8 = 4.42; A = R - V = [3.92, 2.8].
def test_gae_hand_computed():
    b = compute_advantages(_batch([1, 2], [0, 0], [0.5, 1.0]), np.array([99.0, 2.0]), 0.9, 0.8,
                           use_gae=True, use_critic=True)
    np.testing.assert_allclose(b[SB.ADVANTAGES], [3.416, 2.8], rtol=1e-6)
    np.testing.assert_allclose(b[SB.VALUE_TARGETS], [3.916, 3.8], rtol=1e-6)


def test_returns_with_critic_hand_computed():
    b = compute_advantages(_batch([1, 2], [0, 0], [0.5, 1.0]), np.array([99.0, 2.0]), 0.9, 0.8,
                           use_gae=False, use_critic=True)
    np.testing.assert_allclose(b[SB.VALUE_TARGETS], [4.42, 3.8], rtol=1e-6)
    np.testing.assert_allclose(b[SB.ADVANTAGES], [3.92, 2.8], rtol=1e-6)


def test_returns_without_critic_hand_computed():
    b = compute_advantages(_batch([1, 2], [0, 0]), np.array([99.0, 2.0]), 0.9, use_gae=False,
                           use_critic=False)
    np.testing.assert_allclose(b[SB.ADVANTAGES], [4.42, 3.8], rtol=1e-6)
    np.testing.assert_array_equal(b[SB.VALUE_TARGETS], [0.0, 0.0])


def test_gae_lambda_one_equals_returns_minus_values():
    rng = np.random.default_rng(0)
    rewards, vf = rng.normal(size=6), rng.normal(size=6)
    boot = np.zeros(6)
    boot[-1] = 0.7
    gae = compute_advantages(_batch(rewards, [1] * 6, vf), boot, 0.95, 1.0, True, True)
    ret = compute_advantages(_batch(rewards, [1] * 6, vf), boot, 0.95, 1.0, False, True)
    np.testing.assert_allclose(gae[SB.ADVANTAGES], ret[SB.ADVANTAGES], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gae[SB.VALUE_TARGETS], ret[SB.VALUE_TARGETS], rtol=1e-5, atol=1e-5)


# --- several trajectories in one batch ------------------------------------------------------
EPS = [7, 7, 7, 3, 3, 9, 12, 12, 12, 12]
REWARDS = [1.0, -2.0, 0.5, 3.0, 1.0, 4.0, 0.0, 1.0, 2.0, -1.0]
VF = [0.3, -0.1, 0.8, 1.5, 0.2, -0.7, 0.4, 0.0, 0.9, 1.1]
# Bootstrap values are read only at trajectory ends (rows 2, 4, 5, 9); junk elsewhere
# must not leak in.
BOOT = np.array([55.0, 55.0, 0.0, 55.0, 2.5, -1.25, 55.0, 55.0, 55.0, 0.6])


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (0.5, 0.0)])
def test_gae_many_trajectories_matches_reference(gamma, lam):
    b = compute_advantages(_batch(REWARDS, EPS, VF), BOOT.copy(), gamma, lam, True, True)
    adv, targets = ref_gae(REWARDS, VF, EPS, BOOT, gamma, lam)
    np.testing.assert_allclose(b[SB.ADVANTAGES], adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[SB.VALUE_TARGETS], targets, rtol=1e-5, atol=1e-6)
    assert b[SB.ADVANTAGES].dtype == np.float32 and b[SB.VALUE_TARGETS].dtype == np.float32


def test_gae_many_trajectories_spot_values():
    # Trajectory eps 9 is one row: A = r + gamma * boot - V = 4 + 0.9 * -1.25 + 0.7 = 3.575.
    # Trajectory eps 3: delta_4 = 1 + 0.9*2.5 - 0.2 = 3.05, delta_3 = 3 + 0.9*0.2 - 1.5 = 1.68,
    # A_3 = 1.68 + 0.9*0.5*3.05 = 3.0525.
    b = compute_advantages(_batch(REWARDS, EPS, VF), BOOT.copy(), 0.9, 0.5, True, True)
    np.testing.assert_allclose(b[SB.ADVANTAGES][5], 3.575, rtol=1e-6)
    np.testing.assert_allclose(b[SB.ADVANTAGES][4], 3.05, rtol=1e-6)
    np.testing.assert_allclose(b[SB.ADVANTAGES][3], 3.0525, rtol=1e-6)


def test_returns_many_trajectories_matches_reference():
    with_critic = compute_advantages(_batch(REWARDS, EPS, VF), BOOT.copy(), 0.97, 0.5, False, True)
    no_critic = compute_advantages(_batch(REWARDS, EPS), BOOT.copy(), 0.97, 0.5, False, False)
    ret = ref_returns(REWARDS, EPS, BOOT, 0.97)
    np.testing.assert_allclose(with_critic[SB.VALUE_TARGETS], ret, rtol=1e-5)
    np.testing.assert_allclose(with_critic[SB.ADVANTAGES], ret - np.asarray(VF), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(no_critic[SB.ADVANTAGES], ret, rtol=1e-5)
    np.testing.assert_array_equal(no_critic[SB.VALUE_TARGETS], np.zeros(len(EPS)))


def test_gae_needs_critic():
    with pytest.raises(ValueError, match="use_critic"):
        compute_advantages(_batch([1.0], [0], [0.0]), np.zeros(1), 0.9, 1.0, use_gae=True, use_critic=False)


@pytest.mark.parametrize("algo", ["PPO", "A2C", "A3C", "DDPPO"])
def test_every_actor_critic_algorithm_checks_gae_needs_critic_alike(algo):
    # One rule, one message: PPO, A2C, A3C and DD-PPO all call check_gae_needs_critic.
    from rlfleet.registry import get_trainer_class

    trainer_cls = get_trainer_class(algo)
    config = dict(trainer_cls._default_config, use_gae=True, use_critic=False)
    with pytest.raises(ValueError, match=r"^'use_gae': True needs 'use_critic': True \(GAE is built on the value "):
        trainer_cls.validate_algorithm_config(None, config)
    trainer_cls.validate_algorithm_config(None, dict(config, use_gae=False))


def test_random_batches_match_reference():
    rng = np.random.default_rng(123)
    for _ in range(20):
        n = int(rng.integers(1, 40))
        eps = np.cumsum(rng.random(n) < 0.2)  # a new trajectory with probability 0.2
        rewards, vf, boot = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
        gamma, lam = float(rng.uniform(0.5, 1.0)), float(rng.uniform(0.0, 1.0))
        b = compute_advantages(_batch(rewards, eps, vf), boot.copy(), gamma, lam, True, True)
        adv, targets = ref_gae(rewards.astype(np.float32), vf.astype(np.float32), eps, boot, gamma, lam)
        np.testing.assert_allclose(b[SB.ADVANTAGES], adv, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b[SB.VALUE_TARGETS], targets, rtol=1e-4, atol=1e-5)


# --- segmented_discounted_cumsum, trajectory_ends, standardized ------------------------------
def test_segmented_discounted_cumsum_hand_computed():
    x = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    ends = np.array([False, True, False, False, True])
    # Segment [0, 2): 1 + 0.5 * 1 = 1.5, 1; segment [2, 5): 1 + .5 * 1.5 = 1.75, 1.5, 1.
    np.testing.assert_allclose(segmented_discounted_cumsum(x, 0.5, ends), [1.5, 1.0, 1.75, 1.5, 1.0])


def test_segmented_discounted_cumsum_edge_cases():
    assert segmented_discounted_cumsum(np.zeros(0), 0.9, np.zeros(0, bool)).shape == (0,)
    np.testing.assert_allclose(segmented_discounted_cumsum(np.array([3.0]), 0.9, np.array([True])), [3.0])
    # discount 0: no mixing at all; discount 1: plain reverse cumsum per segment.
    x = np.array([1.0, 2.0, 3.0, 4.0])
    ends = np.array([False, True, False, True])
    np.testing.assert_allclose(segmented_discounted_cumsum(x, 0.0, ends), x)
    np.testing.assert_allclose(segmented_discounted_cumsum(x, 1.0, ends), [3.0, 2.0, 7.0, 4.0])
    # A batch ending mid-trajectory (last `ends` False) is still cut at the batch end.
    np.testing.assert_allclose(
        segmented_discounted_cumsum(np.array([1.0, 1.0]), 0.5, np.array([False, False])), [1.5, 1.0])


def test_trajectory_ends():
    np.testing.assert_array_equal(trajectory_ends(np.array([4, 4, 2, 2, 2, 4])),
                                  [False, True, False, False, True, True])
    np.testing.assert_array_equal(trajectory_ends(np.array([1])), [True])


def test_standardized():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    out = standardized(x)
    np.testing.assert_allclose(out, (x - 2.5) / np.std(x), rtol=1e-6)
    assert out.dtype == np.float32
    # A constant column does not blow up.
    assert np.all(np.isfinite(standardized(np.ones(5))))


# --- bootstrap_values: V(next obs) only at non-terminal trajectory ends -------------------
class _FakeValuePolicy:
    def __init__(self):
        self.calls = []

    def is_recurrent(self):
        return False

    def compute_values(self, obs):
        self.calls.append(np.array(obs))
        return obs[:, 0] * 10.0


def test_bootstrap_values_only_at_nonterminal_ends():
    batch = SampleBatch({
        SB.EPS_ID: np.array([1, 1, 2, 2, 3]),
        SB.TERMINATEDS: np.array([False, True, False, False, False]),
        SB.NEXT_OBS: np.arange(5, dtype=np.float32).reshape(5, 1),
    })
    policy = _FakeValuePolicy()
    out = bootstrap_values(policy, batch)
    # Row 1 ends eps 1 terminated -> 0; row 3 ends eps 2 truncated -> 30; row 4 -> 40.
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, 30.0, 40.0])
    assert len(policy.calls) == 1 and policy.calls[0].shape == (2, 1)  # one batched pass
