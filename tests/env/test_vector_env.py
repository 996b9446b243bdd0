"""VectorEnv end-of-episode semantics (horizon, soft_horizon, no_done_at_end, as documented in
rlfleet/env/vector_env.py) and the env-facing sampler options: clip_rewards,
normalize_actions, clip_actions."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.vector_env import VectorEnv
from rlfleet.policy.sample_batch import SampleBatch
from tests.envs import ActionRecordingEnv, CountingEnv, ScriptedEnv, make_worker

SB = SampleBatch


def _steps(venv, n):
    return [venv.step([0] * venv.num_envs) for _ in range(n)]


# --- VectorEnv on its own ----------------------------------------------------------------
def test_terminated_episode_is_terminal_and_resets():
    venv = VectorEnv([CountingEnv({"episode_len": 2})])
    assert [o[0] for o in venv.reset_all()] == [0.0]
    s1, s2, s3 = _steps(venv, 3)
    assert not s1.ends[0] and not s1.terminateds[0] and s1.reset_obs == {}
    assert s2.ends[0] and s2.terminateds[0]
    assert s2.obs[0][0] == 2.0  # the *final* observation, for bootstrapping
    assert s2.reset_obs[0][0] == 0.0  # the first observation of the next episode
    assert s3.obs[0][0] == 1.0 and not s3.ends[0]


def test_truncated_episode_ends_but_is_not_terminal():
    venv = VectorEnv([ScriptedEnv({"episode_len": 2, "end": "truncated"})])
    venv.reset_all()
    _, s2 = _steps(venv, 2)
    assert s2.ends[0] and not s2.terminateds[0]
    assert s2.obs[0][0] == 2.0 and s2.reset_obs[0][0] == 0.0


def test_hard_horizon_truncates_and_resets():
    venv = VectorEnv([CountingEnv({"episode_len": 100})], rules=EpisodeRules(horizon=3))
    venv.reset_all()
    steps = _steps(venv, 7)
    assert [bool(s.ends[0]) for s in steps] == [False, False, True, False, False, True, False]
    # The reference's horizon: the episode ends with done=True, terminal (no bootstrap).
    assert [bool(s.terminateds[0]) for s in steps] == [bool(s.ends[0]) for s in steps]
    assert steps[2].obs[0][0] == 3.0 and steps[2].reset_obs[0][0] == 0.0  # the env was reset
    assert steps[3].obs[0][0] == 1.0


def test_soft_horizon_ends_episode_without_reset_and_counts_as_terminal():
    venv = VectorEnv([CountingEnv({"episode_len": 100})], rules=EpisodeRules(horizon=3, soft_horizon=True))
    venv.reset_all()
    steps = _steps(venv, 7)
    assert [bool(s.ends[0]) for s in steps] == [False, False, True, False, False, True, False]
    assert [bool(s.terminateds[0]) for s in steps] == [False, False, True, False, False, True, False]
    # The env goes on: the next episode starts from the horizon's observation.
    assert steps[2].reset_obs[0][0] == 3.0
    assert [s.obs[0][0] for s in steps] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_soft_horizon_with_no_done_at_end_is_not_terminal():
    venv = VectorEnv([CountingEnv({"episode_len": 100})], rules=EpisodeRules(horizon=2, soft_horizon=True, no_done_at_end=True))
    venv.reset_all()
    steps = _steps(venv, 4)
    assert [bool(s.ends[0]) for s in steps] == [False, True, False, True]
    assert not any(s.terminateds[0] for s in steps)
    assert [s.obs[0][0] for s in steps] == [1.0, 2.0, 3.0, 4.0]


def test_no_done_at_end_makes_env_termination_non_terminal():
    venv = VectorEnv([CountingEnv({"episode_len": 2})], rules=EpisodeRules(no_done_at_end=True))
    venv.reset_all()
    _, s2, s3 = _steps(venv, 3)
    assert s2.ends[0] and not s2.terminateds[0]
    assert s2.reset_obs[0][0] == 0.0 and s3.obs[0][0] == 1.0  # still reset


def test_env_end_before_horizon_restarts_the_horizon_count():
    venv = VectorEnv([CountingEnv({"episode_len": 2})], rules=EpisodeRules(horizon=3))
    venv.reset_all()
    steps = _steps(venv, 6)
    # The env ends every 2 steps (terminal); the horizon of 3 is never reached.
    assert [bool(s.ends[0]) for s in steps] == [False, True] * 3
    assert all(s.terminateds[0] for s in steps if s.ends[0])


def test_sub_envs_end_independently():
    venv = VectorEnv([CountingEnv({"episode_len": 2}), CountingEnv({"episode_len": 3})])
    venv.reset_all()
    steps = _steps(venv, 6)
    assert [list(map(bool, s.ends)) for s in steps] == [
        [False, False], [True, False], [False, True], [True, False], [False, False], [True, True]]


def test_seeds_apply_to_first_reset_only():
    import gymnasium as gym

    a = VectorEnv([gym.make("CartPole-v1")], seeds=[5])
    b = VectorEnv([gym.make("CartPole-v1")], seeds=[5])
    np.testing.assert_array_equal(a.reset_all()[0], b.reset_all()[0])
    c = VectorEnv([gym.make("CartPole-v1")], seeds=[6])
    assert not np.array_equal(a.envs[0].reset(seed=5)[0], c.reset_all()[0])


# --- the same semantics through the RolloutWorker ----------------------------------------
def test_worker_soft_horizon_columns_and_metrics():
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 1000}, "horizon": 3, "soft_horizon": True,
                                  "rollout_fragment_length": 9, "num_envs_per_worker": 1})
    b = w.sample()
    # One env, never reset: observations keep counting; `t` restarts every 3 steps.
    np.testing.assert_array_equal(b[SB.OBS][:, 0], np.arange(9))
    np.testing.assert_array_equal(b[SB.NEXT_OBS][:, 0], np.arange(1, 10))
    np.testing.assert_array_equal(b[SB.T], [0, 1, 2] * 3)
    np.testing.assert_array_equal(b[SB.DONES], [False, False, True] * 3)
    np.testing.assert_array_equal(b[SB.TERMINATEDS], [False, False, True] * 3)
    assert len(set(b[SB.EPS_ID])) == 3
    assert [m.episode_length for m in w.get_metrics()] == [3, 3, 3]


def test_worker_hard_horizon_columns():
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 1000}, "horizon": 4,
                                  "rollout_fragment_length": 8})
    b = w.sample()
    np.testing.assert_array_equal(b[SB.OBS][:, 0], [0, 1, 2, 3] * 2)
    np.testing.assert_array_equal(b[SB.DONES], [False, False, False, True] * 2)
    # The reference's done=True at its horizon: terminal, not truncated.
    np.testing.assert_array_equal(b[SB.TERMINATEDS], [False, False, False, True] * 2)
    assert not b[SB.TRUNCATEDS].any()


def test_worker_no_done_at_end_columns():
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 3}, "no_done_at_end": True,
                                  "rollout_fragment_length": 6})
    b = w.sample()
    np.testing.assert_array_equal(b[SB.DONES], [False, False, True] * 2)
    assert not b[SB.TERMINATEDS].any()


# --- clip_rewards -------------------------------------------------------------------------
RAW = [5.0, -3.0, 0.5, -0.2]


@pytest.mark.parametrize("clip,expected", [
    (None, RAW),  # None: clip only on Atari; CountingEnv-like envs are not Atari
    (False, RAW),
    (True, [1.0, -1.0, 1.0, -1.0]),
    (2.0, [2.0, -2.0, 0.5, -0.2]),
    ((-1.0, 0.3), [0.3, -1.0, 0.3, -0.2]),
])
def test_clip_rewards(clip, expected):
    w = make_worker(ScriptedEnv, {"env_config": {"episode_len": 4, "rewards": RAW}, "clip_rewards": clip,
                                  "rollout_fragment_length": 8})
    b = w.sample()
    np.testing.assert_allclose(b[SB.REWARDS], expected * 2, rtol=1e-6)
    # Episode metrics report the env's own (unclipped) return.
    assert [m.episode_reward for m in w.get_metrics()] == pytest.approx([sum(RAW)] * 2)


# --- normalize_actions / clip_actions -------------------------------------------------------
def _recorded(worker):
    return np.concatenate([np.stack(e.received) for e in worker.env.envs])


def test_normalize_actions_unsquashes_into_bounds():
    w = make_worker(ActionRecordingEnv, {"env_config": {"low": 2.0, "high": 4.0, "dim": 2}, "seed": 1,
                                         "rollout_fragment_length": 50, "normalize_actions": True})
    b = w.sample()
    policy_actions = b[SB.ACTIONS].astype(np.float64)
    got = _recorded(w)
    assert got.shape == (50, 2)
    # The policy acts in [-1, 1] (Gaussian draws, some outside); the env gets [2, 4].
    assert (np.abs(policy_actions) > 1).any() and (np.abs(policy_actions) < 1).any()
    np.testing.assert_allclose(got, 2.0 + (np.clip(policy_actions, -1, 1) + 1.0), rtol=1e-6)
    assert got.min() >= 2.0 and got.max() <= 4.0


def test_clip_actions_without_normalize():
    w = make_worker(ActionRecordingEnv, {"env_config": {"low": 2.0, "high": 4.0}, "seed": 2,
                                         "rollout_fragment_length": 40, "normalize_actions": False,
                                         "clip_actions": True})
    b = w.sample()
    got = _recorded(w)
    np.testing.assert_allclose(got, np.clip(b[SB.ACTIONS].astype(np.float64), 2.0, 4.0), rtol=1e-6)
    assert (got == 2.0).any()  # N(0, 1) draws below the bound were clipped


def test_raw_actions_without_normalize_or_clip():
    w = make_worker(ActionRecordingEnv, {"env_config": {"low": 2.0, "high": 4.0}, "seed": 3,
                                         "rollout_fragment_length": 20, "normalize_actions": False,
                                         "clip_actions": False})
    b = w.sample()
    np.testing.assert_allclose(_recorded(w), b[SB.ACTIONS].astype(np.float64), rtol=1e-6)
    assert (_recorded(w) < 2.0).any()  # untouched N(0, 1) draws, out of the env's bounds
