"""The multi-agent sampler's fast paths give what the plain code gives: the one-observation
check (`ObsRowCheck`) answers as `ObsBatchCheck`, stacking as `np.stack`, the per-policy
batch building as building each agent trajectory on its own, and the callbacks' accessors
see the rows that end up in the batches."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from gymnasium import spaces

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.env.checks import BOX_TOLERANCE, ObsBatchCheck, ObsRowCheck
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.agent_batches import _acted_columns, _agent_batch, agent_batches, stack_obs
from tests.multi_agent_helpers import TWO_POLICIES, JoinLeaveEnv, worker_for

SB = SampleBatch
BIG = float(np.finfo(np.float32).max)


# --- ObsRowCheck --------------------------------------------------------------------------
BOXES = [
    spaces.Box(-1.0, 1.0, (3,), np.float32),  # uniform bounds
    spaces.Box(np.array([-4.8, -np.inf, -0.42, -np.inf], np.float32),
               np.array([4.8, np.inf, 0.42, np.inf], np.float32)),  # CartPole: some unbounded
    spaces.Box(np.array([0.0, -np.inf], np.float32), np.array([np.inf, 5.0], np.float32)),  # one-sided
    spaces.Box(-np.inf, np.inf, (2, 3), np.float32),  # unbounded, 2-D
    spaces.Box(-2.0, 3.0, (100,), np.float32),  # too big for the row check: ObsBatchCheck
]


def _probes(space, rng):
    low = np.where(np.isfinite(space.low), space.low, -10.0).astype(np.float32)
    high = np.where(np.isfinite(space.high), space.high, 10.0).astype(np.float32)
    inside = rng.uniform(low, high).astype(np.float32)
    yield inside
    for value in (np.nan, np.inf, -np.inf, BIG):
        bad = inside.copy()
        bad.flat[0] = value
        yield bad
    for bound, sign in ((space.low, -1), (space.high, 1)):
        flat = np.asarray(bound, np.float64).reshape(-1)
        k = int(np.flatnonzero(np.isfinite(flat))[0]) if np.isfinite(flat).any() else None
        if k is None:
            continue
        for offset in (BOX_TOLERANCE * 0.1, BOX_TOLERANCE * 10):  # within / beyond the tolerance
            near = inside.copy()
            near.flat[k] = flat[k] + sign * offset * max(1.0, abs(flat[k]))
            yield near


@pytest.mark.parametrize("space", BOXES, ids=str)
def test_row_check_answers_as_the_batch_check(space):
    rng = np.random.default_rng(0)
    row, batch = ObsRowCheck(space), ObsBatchCheck(space)
    for obs in _probes(space, rng):
        assert row.ok(obs) == batch.ok(obs), obs
    # Not its dtype or shape: the batch check decides (as it always did).
    obs = next(_probes(space, rng))
    assert row.ok(obs.astype(np.float64)) == batch.ok(obs.astype(np.float64))


def test_row_check_follows_the_trivial_flag():
    check = ObsRowCheck(BOXES[0])
    bad = np.array([5.0, 0.0, 0.0], np.float32)
    assert not check.ok(bad)
    check.trivial = True  # a preprocessor whose outputs leave its space: no longer checked
    assert check.batch.trivial and check.ok(bad)
    assert ObsRowCheck(spaces.Discrete(3)).ok(7)  # not a Box: nothing to check


# --- stacking -----------------------------------------------------------------------------
@pytest.mark.parametrize("obs", [
    [np.arange(4, dtype=np.float32) + k for k in range(8)],
    [np.ones((2, 3), np.float32)] * 3,
    [np.float32(1.0), np.float32(2.0)],
    [np.zeros(2, np.float32), np.zeros(2, np.float64)],
    [[1.0, 2.0], [3.0, 4.0]],
    [np.zeros(2, np.uint8)],
])
def test_stack_is_np_stack(obs):
    out, ref = stack_obs(obs), np.stack(obs)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)


def test_stack_of_ragged_observations_raises_as_np_stack():
    with pytest.raises(ValueError, match="same shape"):
        stack_obs([np.zeros(2, np.float32), np.zeros(3, np.float32)])


# --- building the batches -----------------------------------------------------------------
def _rows(rng, n, t0=0, extra_dtype=np.float32, action_dtype=np.int64):
    """Rows as the sampler closes them: obs, new_obs, action, reward, terminated, done, t,
    (the acting group's extra outputs, its actions), the row's index in the group."""
    rows = []
    for t in range(t0, t0 + n):
        extra = {SB.ACTION_DIST_INPUTS: rng.standard_normal((3, 2)).astype(extra_dtype),
                 SB.VF_PREDS: rng.standard_normal(3).astype(extra_dtype)}
        acts = rng.integers(0, 2, 3).astype(action_dtype)
        done = t == t0 + n - 1
        j = t % 3
        rows.append((rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32),
                     acts[j], float(rng.standard_normal()), done and t % 2 == 0, done, t, (extra, acts), j))
    return rows


def _reference_batch(ep, aid, rows) -> SampleBatch:
    """What the sampler built before rows became tuples: columns appended row by row."""
    cols = defaultdict(list)
    for obs, next_obs, action, reward, term, done, t, (extra, _), j in rows:
        for key, value in ((SB.OBS, obs), (SB.NEXT_OBS, next_obs), (SB.ACTIONS, action), (SB.REWARDS, reward),
                           (SB.TERMINATEDS, term), (SB.TRUNCATEDS, done and not term), (SB.DONES, done), (SB.T, t)):
            cols[key].append(value)
        for k, v in extra.items():
            cols[k].append(v[j])
    n = len(rows)
    batch = SampleBatch({k: np.asarray(v) for k, v in cols.items()})
    batch[SB.REWARDS] = batch[SB.REWARDS].astype(np.float32)
    batch[SB.EPS_ID] = np.full(n, ep.episode_id, np.int64)
    batch[SB.ENV_ID] = np.full(n, ep.env_index, np.int64)
    batch[SB.AGENT_INDEX] = np.full(n, ep.agent_index(aid), np.int64)
    return batch


def _same(a: SampleBatch, b: SampleBatch):
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("case", ["uniform", "shared_groups", "mixed_dtypes", "ragged_extras"])
def test_policy_batches_equal_per_trajectory_batches(case):
    rng = np.random.default_rng(1)
    eps = [MultiAgentEpisode(10 + k, k, lambda aid, episode: "p") for k in range(3)]
    group = [(eps[0], "a", _rows(rng, 5)), (eps[0], "b", _rows(rng, 1, t0=3)), (eps[1], "a", _rows(rng, 7)),
             (eps[2], 7, _rows(rng, 2))]
    if case == "shared_groups":  # agents that acted in the same group (as two agents of one policy do)
        rows0, rows1 = group[0][2], group[2][2]
        rows1[:3] = [r1[:7] + (r0[7], (r0[8] + 1) % 3) for r0, r1 in zip(rows0[:3], rows1[:3])]
        rows1[:3] = [r[:2] + (r[7][1][r[8]],) + r[3:] for r in rows1[:3]]
    if case == "mixed_dtypes":  # one trajectory's outputs in float64: no pooling across them
        group.append((eps[2], 8, _rows(rng, 3, extra_dtype=np.float64, action_dtype=np.int32)))
    if case == "ragged_extras":  # one trajectory with another column
        ep, aid, rows = group[2]
        group[2] = (ep, aid, [row[:7] + (({**row[7][0], "extra_col": np.zeros(3)}, row[7][1]),) + row[8:]
                              for row in rows])
    rows = [row for _, _, trajectory in group for row in trajectory]
    pooled_columns = _acted_columns(tuple(r[7] for r in rows), tuple(r[8] for r in rows))
    assert (pooled_columns is not None) == (case in ("uniform", "shared_groups"))  # else: row by row
    expected = [_reference_batch(ep, aid, rows) for ep, aid, rows in group]
    pooled = agent_batches(group)
    assert len(pooled) == len(expected)
    for got, one, ref in zip(pooled, [_agent_batch(ep, aid, rows) for ep, aid, rows in group], expected):
        _same(got, ref)
        _same(one, ref)
    ref = expected[0]
    np.testing.assert_array_equal(ref[SB.TRUNCATEDS], ref[SB.DONES] & ~ref[SB.TERMINATEDS])
    assert ref[SB.REWARDS].dtype == np.float32 and list(ref[SB.EPS_ID]) == [10] * 5


class ExtraOutsRecorder(DefaultCallbacks):
    seen = []

    def on_episode_step(self, *, worker, base_env, episode, env_index, **kwargs):
        for aid in episode.get_agents():  # (an agent that acted in this step has its row at t = length - 1)
            ExtraOutsRecorder.seen.append((episode.episode_id, aid, episode.length - 1, episode.last_action_for(aid),
                                           episode.last_extra_action_outs_for(aid)))


def test_extra_action_outs_of_the_accessor_are_the_batch_rows():
    ExtraOutsRecorder.seen = []
    w = worker_for(JoinLeaveEnv, num_envs_per_worker=2, rollout_fragment_length=6, callbacks=ExtraOutsRecorder,
                   multiagent=TWO_POLICIES)
    batch = w.sample()
    rows = {}
    for pid, b in batch.policy_batches.items():
        for k in range(b.count):
            rows[int(b[SB.EPS_ID][k]), "a" if pid == "pa" else "b", int(b[SB.T][k])] = (b, k)
    checked = 0
    for eps_id, aid, t, action, outs in ExtraOutsRecorder.seen:
        if (eps_id, aid, t) not in rows:
            continue
        b, k = rows[eps_id, aid, t]
        assert action == b[SB.ACTIONS][k]
        assert set(outs) >= {SB.ACTION_LOGP, SB.ACTION_DIST_INPUTS}
        for key, value in outs.items():
            np.testing.assert_array_equal(value, b[key][k])
        checked += 1
    assert checked >= 10
    w.stop()


# --- deferred extra outputs (the actors' finish()) -------------------------------------------
def _ppo_two_agent_worker(**overrides):
    from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
    from rlfleet.config import merge_configs, validate_config
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
    from rlfleet.rollout.rollout_worker import RolloutWorker

    config = merge_configs(DEFAULT_CONFIG, {
        "num_envs_per_worker": 4, "rollout_fragment_length": 50, "seed": 3, "env_config": {"num_agents": 2},
        "multiagent": {"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"},
        **overrides})
    validate_config(config)
    return RolloutWorker(env_creator=MultiAgentCartPole, policy_class=PPOTorchPolicy, config=config)


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_deferred_extra_outputs_are_those_compute_actions_gives(batch_mode):
    """Acting with a NumPy actor and filling the log-likelihoods and values in once per
    `sample()` gives the batches `compute_actions` step by step gives (the same actions, the
    same draws; values and log-likelihoods equal to float rounding)."""
    deferred, stepwise = _ppo_two_agent_worker(batch_mode=batch_mode), _ppo_two_agent_worker(batch_mode=batch_mode)
    stepwise.sampler._actors.defer = False
    assert deferred.sampler._actors.defer
    for _ in range(3):
        a, b = deferred.sample(), stepwise.sample()
        assert a.policy_batches.keys() == b.policy_batches.keys() == {"p0", "p1"}
        for pid in a.policy_batches:
            x, y = a.policy_batches[pid], b.policy_batches[pid]
            assert x.keys() == y.keys()
            for key in x.keys():
                if x[key].dtype.kind == "f":
                    assert x[key].dtype == y[key].dtype, key
                    np.testing.assert_allclose(x[key], y[key], rtol=1e-5, atol=1e-5, err_msg=key)
                else:
                    np.testing.assert_array_equal(x[key], y[key], err_msg=key)
        assert not deferred.sampler._actors  # every acting group was filled in


def test_a_step_callback_keeps_compute_actions():
    """A callback may read `episode.last_extra_action_outs_for(agent)` each step: then every
    step computes all the extra outputs."""
    seen = []

    class ReadsExtras(DefaultCallbacks):
        def on_episode_step(self, *, worker, base_env, episode, env_index=None, **kwargs):
            seen.append(episode.last_extra_action_outs_for(0)[SB.VF_PREDS])

    worker = _ppo_two_agent_worker(callbacks=ReadsExtras)
    assert not worker.sampler._actors.defer
    worker.sample()
    assert seen and all(np.isfinite(v) for v in seen)


def test_observation_fn_keeps_compute_actions():
    """`observation_fn` is user code run every step, as a step callback is."""
    worker = _ppo_two_agent_worker(multiagent={
        "policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}",
        "observation_fn": lambda agent_obs, **kw: agent_obs})
    assert not worker.sampler._actors.defer
    batch = worker.sample()
    assert SB.VF_PREDS in batch.policy_batches["p0"]


def test_an_error_mid_sample_fills_in_the_rows_acted_on():
    """Rows acted on before an error get their log-likelihoods and values from the weights
    they acted with, not from weights set before the next `sample()`."""
    deferred, stepwise = _ppo_two_agent_worker(), _ppo_two_agent_worker()
    stepwise.sampler._actors.defer = False
    for worker in (deferred, stepwise):
        sampler = worker.sampler
        step, calls = sampler._step, []

        def failing_step(step=step, calls=calls):
            calls.append(1)
            if len(calls) == 30:
                raise RuntimeError("user code failed")
            return step()

        sampler._step = failing_step
        with pytest.raises(RuntimeError):
            worker.sample()
        assert not sampler._actors
        sampler._step = step
        worker.get_policy("p0").set_weights({k: v * 1.1 for k, v in worker.get_policy("p0").get_weights().items()})
    a, b = deferred.sample().policy_batches["p0"], stepwise.sample().policy_batches["p0"]
    np.testing.assert_allclose(a[SB.VF_PREDS], b[SB.VF_PREDS], rtol=1e-5, atol=1e-5)
