"""The single-agent sampler through the real RolloutWorker: fragment sizes and layout,
complete episodes (stitched across chunks and sample() calls), truncation bootstrapping
with the PPO policy, MeanStdFilter, and Dict/Tuple/Discrete observations."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import trajectory_ends
from rlfleet.utils.filters import FilterManager
from tests.envs import (
    CountingEnv,
    DictObsEnv,
    DiscreteObsEnv,
    ScriptedEnv,
    TupleObsEnv,
    make_worker,
    recorded_cartpole,
)

SB = SampleBatch


def _episodes(batch):
    return batch.split_by_episode()


# --- fragment sizes and layout ---------------------------------------------------------------
@pytest.mark.parametrize("frag,num_envs", [(7, 1), (7, 3), (1, 2), (16, 4)])
def test_truncate_episodes_fragment_size(frag, num_envs):
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 5}, "rollout_fragment_length": frag,
                                  "num_envs_per_worker": num_envs})
    for _ in range(3):
        b = w.sample()
        assert b.count == frag * num_envs
        # Env-major: sub-env 0's steps, then sub-env 1's, ...
        np.testing.assert_array_equal(b[SB.ENV_ID], np.repeat(np.arange(num_envs), frag))


def test_truncate_episodes_rows_follow_the_env():
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 5}, "rollout_fragment_length": 7,
                                  "num_envs_per_worker": 2})
    b1, b2 = w.sample(), w.sample()
    for b, start in ((b1, 0), (b2, 7)):
        for env in range(2):
            rows = b[SB.ENV_ID] == env
            # CountingEnv's observation is the step count: t and obs agree, and continue
            # across sample() calls (7 rows per call, 5-step episodes).
            expected_t = (np.arange(start, start + 7)) % 5
            np.testing.assert_array_equal(b[SB.T][rows], expected_t)
            np.testing.assert_array_equal(b[SB.OBS][rows][:, 0], expected_t)
            np.testing.assert_array_equal(b[SB.NEXT_OBS][rows][:, 0], expected_t + 1)
            np.testing.assert_array_equal(b[SB.DONES][rows], expected_t == 4)
    # An episode cut by the fragment end continues in the next batch under the same id.
    assert b1[SB.EPS_ID][6] == b2[SB.EPS_ID][0]
    ids = np.concatenate([b1[SB.EPS_ID], b2[SB.EPS_ID]])
    # Episode ids are unique across sub-envs.
    assert not set(b1[SB.EPS_ID][b1[SB.ENV_ID] == 0]) & set(b1[SB.EPS_ID][b1[SB.ENV_ID] == 1])
    assert len(set(ids)) == 2 * 3  # each sub-env ran 14 steps: episodes 0-4, 5-9, 10-13


def _check_complete(batch):
    eps = _episodes(batch)
    assert eps, "no episode in the batch"
    for e in eps:
        np.testing.assert_array_equal(e[SB.T], np.arange(e.count))
        assert e[SB.DONES][-1] and not e[SB.DONES][:-1].any()
    return eps


@pytest.mark.parametrize("episode_len,frag,num_envs", [(7, 5, 2), (12, 5, 2), (3, 10, 1), (5, 4, 3)])
def test_complete_episodes_returns_whole_episodes(episode_len, frag, num_envs):
    w = make_worker(CountingEnv, {"env_config": {"episode_len": episode_len}, "rollout_fragment_length": frag,
                                  "num_envs_per_worker": num_envs, "batch_mode": "complete_episodes"})
    seen_ids = set()
    for _ in range(4):
        b = w.sample()
        assert b.count >= frag * num_envs
        eps = _check_complete(b)
        for e in eps:
            assert e.count == episode_len
            # Stitched pieces carry the right data: CountingEnv's obs is the step count.
            np.testing.assert_array_equal(e[SB.OBS][:, 0], np.arange(episode_len))
            eid = int(e[SB.EPS_ID][0])
            assert eid not in seen_ids, "an episode came back twice"
            seen_ids.add(eid)
        assert b.count == episode_len * len(eps)


def test_complete_episodes_cartpole_variable_lengths():
    w = make_worker("CartPole-v1", {"rollout_fragment_length": 20, "num_envs_per_worker": 3, "seed": 0,
                                    "batch_mode": "complete_episodes"})
    total_eps = 0
    for _ in range(3):
        b = w.sample()
        assert b.count >= 60
        eps = _check_complete(b)
        total_eps += len(eps)
        assert set(b[SB.TERMINATEDS][b[SB.DONES]]) == {True}  # CartPole falls, never truncates this soon
    lengths = [m.episode_length for m in w.get_metrics()]
    # Every finished episode was returned (none is still pending after the last cut).
    assert len(lengths) >= total_eps


def test_worker_metrics_match_episodes():
    w = make_worker(ScriptedEnv, {"env_config": {"episode_len": 4, "rewards": [1.0, 2.0]},
                                  "rollout_fragment_length": 12})
    w.sample()
    metrics = w.get_metrics()
    assert [(m.episode_length, m.episode_reward) for m in metrics] == [(4, 6.0)] * 3
    assert w.get_metrics() == []  # popped


# --- truncation bootstrapping through the PPO policy ------------------------------------------
GAMMA, LAMBDA = 0.9, 0.95


def _ppo_worker(env_config, frag, **extra):
    w = make_worker(ScriptedEnv, {"env_config": env_config, "rollout_fragment_length": frag, "gamma": GAMMA,
                                  "lambda": LAMBDA, "seed": 0, **extra})
    policy = w.get_policy()
    # Make V large and obs-dependent so a missing (or wrong) bootstrap term is obvious.
    weights = policy.get_weights()
    weights["value_head.bias"] = np.array([5.0], np.float32)
    weights["value_head.weight"] = np.full_like(weights["value_head.weight"], 0.5)
    policy.set_weights(weights)
    return w, policy


def _gae_reference(b, boot):
    rewards, vf = b[SB.REWARDS].astype(np.float64), b[SB.VF_PREDS].astype(np.float64)
    adv = np.zeros(b.count)
    ends = trajectory_ends(b[SB.EPS_ID])
    gae = 0.0
    for t in range(b.count - 1, -1, -1):
        if ends[t]:
            next_v, gae = boot[t], 0.0
        else:
            next_v = vf[t + 1]
        gae = rewards[t] + GAMMA * next_v - vf[t] + GAMMA * LAMBDA * gae
        adv[t] = gae
    return adv


def test_truncated_episode_bootstraps_from_final_obs():
    w, policy = _ppo_worker({"episode_len": 4, "end": "truncated", "rewards": [1.0]}, frag=8)
    b = w.sample()
    last = np.flatnonzero(b[SB.DONES])
    assert list(last) == [3, 7]
    assert b[SB.TRUNCATEDS][last].all() and not b[SB.TERMINATEDS].any()
    v_final = policy.compute_values(b[SB.NEXT_OBS][last])
    assert np.all(np.abs(v_final) > 1.0)
    np.testing.assert_allclose(b[SB.VALUE_TARGETS][last], 1.0 + GAMMA * v_final, rtol=1e-5)
    boot = np.zeros(b.count)
    boot[last] = v_final
    np.testing.assert_allclose(b[SB.ADVANTAGES], _gae_reference(b, boot), rtol=1e-4, atol=1e-4)


def test_terminated_episode_does_not_bootstrap():
    w, policy = _ppo_worker({"episode_len": 4, "end": "terminated", "rewards": [1.0]}, frag=8)
    b = w.sample()
    last = np.flatnonzero(b[SB.DONES])
    assert list(last) == [3, 7] and b[SB.TERMINATEDS][last].all()
    np.testing.assert_allclose(b[SB.VALUE_TARGETS][last], [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(b[SB.ADVANTAGES], _gae_reference(b, np.zeros(b.count)), rtol=1e-4, atol=1e-4)


def test_fragment_cut_mid_episode_bootstraps():
    w, policy = _ppo_worker({"episode_len": 100, "rewards": [0.5]}, frag=6, num_envs_per_worker=2)
    b = w.sample()
    assert not b[SB.DONES].any()
    cut = np.array([5, 11])  # the last row of each sub-env's fragment
    v_next = policy.compute_values(b[SB.NEXT_OBS][cut])
    np.testing.assert_allclose(b[SB.VALUE_TARGETS][cut], 0.5 + GAMMA * v_next, rtol=1e-5)
    boot = np.zeros(b.count)
    boot[cut] = v_next
    np.testing.assert_allclose(b[SB.ADVANTAGES], _gae_reference(b, boot), rtol=1e-4, atol=1e-4)


def test_horizon_is_terminal_as_in_the_reference_and_no_done_at_end_bootstraps():
    # Episodes of the env terminate at step 6; the horizon (4) cuts the first one short.
    w, policy = _ppo_worker({"episode_len": 6, "end": "terminated"}, frag=4, horizon=4)
    b = w.sample()
    assert b[SB.DONES][3] and b[SB.TERMINATEDS][3]
    np.testing.assert_allclose(b[SB.VALUE_TARGETS][3], 1.0, rtol=1e-5)  # the reward alone: done=True
    w, policy = _ppo_worker({"episode_len": 6, "end": "terminated"}, frag=4, horizon=4, no_done_at_end=True)
    b = w.sample()
    assert b[SB.DONES][3] and not b[SB.TERMINATEDS][3]
    v = policy.compute_values(b[SB.NEXT_OBS][3:4])
    np.testing.assert_allclose(b[SB.VALUE_TARGETS][3], 1.0 + GAMMA * v[0], rtol=1e-5)


def test_the_envs_own_time_limit_bootstraps():
    w, policy = _ppo_worker({"episode_len": 4, "end": "truncated"}, frag=4)
    b = w.sample()
    assert b[SB.DONES][3] and not b[SB.TERMINATEDS][3]
    v = policy.compute_values(b[SB.NEXT_OBS][3:4])
    np.testing.assert_allclose(b[SB.VALUE_TARGETS][3], 1.0 + GAMMA * v[0], rtol=1e-5)


def test_vf_preds_are_the_models_values():
    w, policy = _ppo_worker({"episode_len": 5}, frag=10)
    b = w.sample()
    np.testing.assert_allclose(b[SB.VF_PREDS], policy.compute_values(b[SB.OBS]), rtol=1e-5, atol=1e-6)


# --- MeanStdFilter ----------------------------------------------------------------------------
def _normalised_reference(seen):
    """What the filter outputs for seen[k], given it has seen seen[:k+1] (in that order)."""
    out = []
    for k in range(len(seen)):
        xs = np.stack(seen[:k + 1])
        mean = xs.mean(0)
        std = xs.std(0, ddof=1) if k > 0 else np.abs(mean)
        out.append((xs[-1] - mean) / (std + 1e-8))
    return np.stack(out)


def test_mean_std_filter_normalises_sampled_obs():
    w = make_worker(recorded_cartpole, {"observation_filter": "MeanStdFilter", "rollout_fragment_length": 60,
                                        "seed": 3})
    b = w.sample()
    seen = w.env.envs[0].seen
    expected = _normalised_reference(seen)
    # Walk the env's observation stream: reset obs, then one obs per step, plus a reset obs
    # after each episode end.
    cur = 0
    for t in range(b.count):
        np.testing.assert_allclose(b[SB.OBS][t], expected[cur], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(b[SB.NEXT_OBS][t], expected[cur + 1], rtol=1e-4, atol=1e-4)
        cur += 2 if b[SB.DONES][t] else 1
    assert b[SB.DONES].any(), "pick a seed/fragment with an episode end in it"
    f = w.filters["default_policy"]
    assert f.rs.n == len(seen)
    np.testing.assert_allclose(f.rs.mean, np.mean(seen, axis=0), rtol=1e-9, atol=1e-12)


def test_filters_of_two_workers_merge_to_stats_over_all_obs():
    cfg = {"observation_filter": "MeanStdFilter", "rollout_fragment_length": 40, "num_envs_per_worker": 2}
    a = make_worker(recorded_cartpole, {**cfg, "seed": 1})
    b = make_worker(recorded_cartpole, {**cfg, "seed": 2})
    a.sample()
    b.sample()
    b.sample()
    all_obs = np.stack([o for w in (a, b) for env in w.env.envs for o in env.seen])
    local, remote = a.filters, b.filters
    FilterManager.synchronize(local, [remote])
    merged = local["default_policy"]
    assert merged.rs.n == len(all_obs)
    np.testing.assert_allclose(merged.rs.mean, all_obs.mean(0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(merged.rs.std, all_obs.std(0, ddof=1), rtol=1e-9)
    # The remote now has the merged stats and an empty buffer (nothing is counted twice).
    assert remote["default_policy"].rs.n == len(all_obs) and remote["default_policy"].buffer.n == 0
    np.testing.assert_allclose(remote["default_policy"].rs.mean, all_obs.mean(0), rtol=1e-9, atol=1e-12)


def test_no_filter_passes_obs_through():
    w = make_worker(CountingEnv, {"env_config": {"episode_len": 50}, "rollout_fragment_length": 5})
    np.testing.assert_array_equal(w.sample()[SB.OBS][:, 0], np.arange(5))


# --- observation spaces ----------------------------------------------------------------------
def test_discrete_obs_are_one_hot():
    w = make_worker(DiscreteObsEnv, {"env_config": {"n": 4, "episode_len": 6}, "rollout_fragment_length": 8})
    b = w.sample()
    assert b[SB.OBS].shape == (8, 4)
    expected = np.eye(4)[np.array([0, 1, 2, 3, 0, 1, 0, 1])]  # episode restarts after 6 steps
    np.testing.assert_array_equal(b[SB.OBS], expected)


def test_dict_obs_are_flattened():
    w = make_worker(DictObsEnv, {"rollout_fragment_length": 4})
    b = w.sample()
    assert b[SB.OBS].shape == (4, 5)
    # Dict keys in sorted order: "mode" (one-hot of 3), then "pos" (2 floats).
    for t in range(4):
        np.testing.assert_array_equal(b[SB.OBS][t], np.concatenate([np.eye(3)[t % 3], [t, -t]]))


def test_tuple_obs_and_box_actions():
    w = make_worker(TupleObsEnv, {"rollout_fragment_length": 6, "num_envs_per_worker": 2})
    b = w.sample()
    assert b[SB.OBS].shape == (12, 5) and b[SB.ACTIONS].shape == (12, 2)
    np.testing.assert_array_equal(b[SB.OBS][:3], [[1, 0, 0, 0, 0], [0, 1, 1, 1, 1], [1, 0, 2, 2, 2]])
    assert np.isfinite(b[SB.ADVANTAGES]).all()


# --- the fast path (rlfleet/fast/inference.ChunkActor) -----------------------------------------
def _log_softmax(x):
    x = x.astype(np.float64)
    top = x.max(1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(1, keepdims=True))


@pytest.mark.parametrize("num_envs", [1, 3])
def test_fast_path_columns_match_the_torch_policy(num_envs):
    """The NumPy actor's deferred columns equal what the torch model gives for the recorded rows."""
    import torch

    w = make_worker("CartPole-v1", {"num_envs_per_worker": num_envs, "rollout_fragment_length": 50, "seed": 3})
    policy = w.get_policy()
    assert policy.actor(True, 0, steps=5, num_envs=num_envs).backend == "numpy"  # the fast path is on
    for _ in range(2):
        b = w.sample()
        with torch.no_grad():
            logits = policy.model({SB.OBS: torch.as_tensor(b[SB.OBS])}, [], None)[0].numpy()
            values = policy.model.value_function().numpy()
        np.testing.assert_allclose(b[SB.ACTION_DIST_INPUTS], logits, rtol=1e-5, atol=1e-5)
        logp = _log_softmax(logits)[np.arange(b.count), b[SB.ACTIONS]]
        np.testing.assert_allclose(b[SB.ACTION_LOGP], logp, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b[SB.ACTION_PROB], np.exp(logp), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b[SB.VF_PREDS], values, rtol=1e-4, atol=1e-5)
        assert b[SB.ACTIONS].dtype == np.int64 and set(np.unique(b[SB.ACTIONS])) <= {0, 1}


def test_fast_path_actions_follow_the_softmax():
    """Gumbel-max noise drawn per chunk: action frequencies match the policy's probabilities."""
    from rlfleet.fast.inference import ChunkActor

    class FixedNet:
        num_outputs = 3

        def __call__(self, obs, values=True):
            return np.tile(np.log(np.array([0.2, 0.3, 0.5], np.float32)), (len(obs), 1)), None

    from rlfleet.models.distributions import Categorical

    actor = ChunkActor(FixedNet(), Categorical, np.random.default_rng(0), True, 400, 50)
    actions = np.concatenate([actor.act(np.zeros((50, 4), np.float32))[0] for _ in range(400)])
    freq = np.bincount(actions, minlength=3) / len(actions)
    np.testing.assert_allclose(freq, [0.2, 0.3, 0.5], atol=0.01)  # 20000 draws: std ~0.0035
    greedy = ChunkActor(FixedNet(), Categorical, np.random.default_rng(0), False, 2, 4)
    assert list(greedy.act(np.zeros((4, 4), np.float32))[0]) == [2, 2, 2, 2]


def test_fast_path_gaussian_actions_and_logp():
    """Box actions (Pendulum): draws around the mean with the model's std, logp of each draw
    equal to torch's DiagGaussian; greedy sampling returns the mean with logp 0."""
    import torch

    from rlfleet.models.distributions import DiagGaussian

    w = make_worker("Pendulum-v1", {"num_envs_per_worker": 2, "rollout_fragment_length": 100, "seed": 1,
                                    "normalize_actions": False})
    policy = w.get_policy()
    assert policy.dist_class is DiagGaussian and policy.actor(True, 0, steps=5, num_envs=2).backend == "numpy"
    b = w.sample()
    inputs = torch.as_tensor(b[SB.ACTION_DIST_INPUTS])
    expected = DiagGaussian(inputs, policy.model).logp(torch.as_tensor(b[SB.ACTIONS])).numpy()
    np.testing.assert_allclose(b[SB.ACTION_LOGP], expected, rtol=1e-4, atol=1e-4)
    mean, log_std = np.split(b[SB.ACTION_DIST_INPUTS], 2, axis=1)
    z = (b[SB.ACTIONS] - mean) / np.exp(log_std)
    assert abs(z.mean()) < 0.15 and 0.85 < z.std() < 1.15  # 200 standard-normal draws
    greedy = make_worker("Pendulum-v1", {"rollout_fragment_length": 20, "explore": False, "seed": 1})
    g = greedy.sample()
    np.testing.assert_allclose(g[SB.ACTIONS], np.split(g[SB.ACTION_DIST_INPUTS], 2, axis=1)[0], rtol=1e-6)
    np.testing.assert_array_equal(g[SB.ACTION_LOGP], 0.0)


def test_fast_path_is_seeded_and_follows_weight_changes():
    cfg = {"num_envs_per_worker": 2, "rollout_fragment_length": 30, "seed": 7}
    a, b = make_worker("CartPole-v1", cfg), make_worker("CartPole-v1", cfg)
    for _ in range(2):
        ba, bb = a.sample(), b.sample()
        for key in (SB.ACTIONS, SB.OBS, SB.ACTION_LOGP, SB.VF_PREDS):
            np.testing.assert_array_equal(ba[key], bb[key])
    # New weights between sample() calls: the next chunk acts and values with them.
    policy = a.get_policy()
    weights = {k: v * 0.5 for k, v in policy.get_weights().items()}
    policy.set_weights(weights)
    batch = a.sample()
    np.testing.assert_allclose(batch[SB.VF_PREDS], policy.compute_values(batch[SB.OBS]), rtol=1e-4, atol=1e-5)


def test_fast_path_not_used_where_it_would_change_behaviour():
    lstm = make_worker("CartPole-v1", {"model": {"use_lstm": True, "lstm_cell_size": 8}, "rollout_fragment_length": 5})
    assert lstm.get_policy().actor(True, 0, steps=5, num_envs=1).backend == "torch"
    warm = make_worker("CartPole-v1", {"exploration_config": {"type": "StochasticSampling", "random_timesteps": 50},
                                       "rollout_fragment_length": 20})
    policy = warm.get_policy()
    assert policy.actor(True, 0, steps=20, num_envs=1).backend == "torch"
    assert policy.actor(True, 50, steps=20, num_envs=1).backend == "numpy"
    b = warm.sample()  # the first 20 steps are uniformly random: the torch path records them
    assert b.count == 20 and np.isfinite(b[SB.ACTION_LOGP]).all()


def test_single_threaded_blas_restores_the_thread_count():
    from rlfleet.fast import blas

    with blas.single_threaded_blas():
        pass
    setter = blas._BLAS_SETTER
    if not setter:
        pytest.skip("NumPy without bundled OpenBLAS: single_threaded_blas does nothing")
    before = setter(3)
    with blas.single_threaded_blas():
        assert setter(1) == 1  # inside: one thread
    assert setter(before) == 3  # after: restored
