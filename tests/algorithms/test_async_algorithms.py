"""The asynchronous family: A2C, A3C, IMPALA, APPO.

V-trace against a plain per-trajectory loop; A2C's microbatches against one full batch;
every algorithm with near-default settings on a continuous env, multi-agent, through a
checkpoint; IMPALA and A3C on remote workers of a real Ray, with a worker killed mid-run.
Learning on CartPole runs from tuned_examples/{a2c,a3c,impala,appo} (tests/tuned_examples/test_learning.py).
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

from rlfleet.algorithms.a2c import A2CTrainer
from rlfleet.algorithms.a3c import A3CTrainer
from rlfleet.algorithms.appo import APPOTrainer
from rlfleet.algorithms.impala import ImpalaTrainer
from rlfleet.algorithms.common.vtrace import segment_ends, vtrace
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import compute_advantages

ALL = [A2CTrainer, A3CTrainer, ImpalaTrainer, APPOTrainer]
# Near-default settings, only small enough to run in a second or two.
FAST = {"min_iter_time_s": 0, "seed": 1, "model": {"fcnet_hiddens": [16]}}
SMALL = {"A2C": {}, "A3C": {"grads_per_step": 4}, "IMPALA": {"min_iter_time_s": 0.5, "train_batch_size": 100},
         "APPO": {"min_iter_time_s": 0.5, "train_batch_size": 100}}


# --- V-trace --------------------------------------------------------------------------
def vtrace_by_loops(behaviour_logp, target_logp, rewards, values, bootstrap, discounts, ends, rho_bar, pg_rho_bar):
    """The paper's recursion, one trajectory at a time, one step at a time."""
    n = len(rewards)
    vs, adv = np.zeros(n), np.zeros(n)
    starts = [0] + [i + 1 for i in range(n - 1) if ends[i]]
    stops = [i + 1 for i in range(n) if ends[i]]
    for s, e in zip(starts, stops):
        next_vs = next_v = bootstrap[e - 1]
        for t in range(e - 1, s - 1, -1):
            rho = np.exp(target_logp[t] - behaviour_logp[t])
            delta = min(rho_bar, rho) * (rewards[t] + discounts[t] * next_v - values[t])
            vs[t] = values[t] + delta + discounts[t] * min(1.0, rho) * (next_vs - next_v)
            adv[t] = min(pg_rho_bar, rho) * (rewards[t] + discounts[t] * next_vs - values[t])
            next_vs, next_v = vs[t], values[t]
    return vs, adv


@pytest.mark.parametrize("rho_bar,pg_rho_bar", [(1.0, 1.0), (0.5, 2.0), (3.0, 0.7)])
def test_vtrace_matches_the_per_step_recursion(rho_bar, pg_rho_bar):
    rng = np.random.default_rng(0)
    n = 64
    eps_id = np.repeat([5, 9, 9, 2, 7], [10, 20, 0, 30, 4])[:n]
    t = np.concatenate([np.arange(10), np.arange(20), np.arange(30), np.arange(4)])
    t[40:] += 100  # a jump in t inside one eps_id: two fragments that are not consecutive
    batch = SampleBatch({SampleBatch.EPS_ID: eps_id, SampleBatch.T: t})
    ends = segment_ends(batch)
    assert list(np.flatnonzero(ends)) == [9, 29, 39, 59, 63]
    terminal = np.zeros(n, bool)
    terminal[[29, 63]] = True
    args = dict(behaviour_logp=rng.normal(-1, 0.5, n), target_logp=rng.normal(-1, 0.5, n), rewards=rng.normal(size=n),
                values=rng.normal(size=n), bootstrap=np.where(terminal, 0.0, rng.normal(size=n)),
                discounts=0.97 * ~terminal, ends=ends)
    vs, adv = vtrace(**args, clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar)
    ref_vs, ref_adv = vtrace_by_loops(**args, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar)
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    rhos = np.exp(args["target_logp"] - args["behaviour_logp"])
    assert (rhos > rho_bar).any() and (rhos < rho_bar).any()  # the clip is exercised


def test_vtrace_on_policy_is_the_bootstrapped_return():
    # pi == mu: every rho is 1, so vs is the discounted return bootstrapped at the end
    # (GAE with lambda = 1), and the advantages are the one-step TD errors on vs.
    rng = np.random.default_rng(1)
    n = 30
    batch = SampleBatch({SampleBatch.EPS_ID: np.repeat([1, 2], [12, 18]), SampleBatch.REWARDS: rng.normal(size=n),
                         SampleBatch.VF_PREDS: rng.normal(size=n)})
    ends = segment_ends(batch)
    bootstrap = rng.normal(size=n)
    logp = rng.normal(size=n)
    vs, _ = vtrace(behaviour_logp=logp, target_logp=logp, rewards=batch[SampleBatch.REWARDS],
                   values=batch[SampleBatch.VF_PREDS], bootstrap=bootstrap, discounts=np.full(n, 0.9), ends=ends)
    expected = compute_advantages(batch, bootstrap, gamma=0.9, lambda_=1.0)[SampleBatch.VALUE_TARGETS]
    np.testing.assert_allclose(vs, expected, rtol=1e-5, atol=1e-5)


# --- A2C microbatches ----------------------------------------------------------------------
def test_a2c_microbatches_sum_to_the_full_batch_update(tmp_path):
    config = dict(FAST, train_batch_size=60, rollout_fragment_length=20, grad_clip=None)
    full = A2CTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path / "a"))
    micro = A2CTrainer(env="CartPole-v1", config=dict(config, microbatch_size=25), logdir=str(tmp_path / "b"))
    try:
        batch = full.workers.local_worker().sample()
        full.get_policy().learn_on_batch(batch)
        micro.get_policy().learn_on_microbatches(batch, 25)
        before = A2CTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path / "c"))
        changed = False
        for name, value in full.get_weights()[DEFAULT_POLICY_ID].items():
            np.testing.assert_allclose(micro.get_weights()[DEFAULT_POLICY_ID][name], value, rtol=1e-4, atol=1e-6)
            changed |= not np.allclose(before.get_weights()[DEFAULT_POLICY_ID][name], value)
        before.stop()
        assert changed
    finally:
        full.stop()
        micro.stop()


def test_config_errors_name_the_keys(tmp_path):
    with pytest.raises(ValueError, match="microbatch_size"):
        A2CTrainer(env="CartPole-v1", config={"microbatch_size": 500, "train_batch_size": 200}, logdir=str(tmp_path))
    with pytest.raises(ValueError, match="replay_buffer_num_slots"):
        ImpalaTrainer(env="CartPole-v1", config={"replay_proportion": 0.5}, logdir=str(tmp_path))
    with pytest.raises(ValueError, match="opt_type"):
        ImpalaTrainer(env="CartPole-v1", config={"opt_type": "sgd"}, logdir=str(tmp_path))


# --- every algorithm, near defaults ----------------------------------------------------------
@pytest.mark.parametrize("cls", ALL, ids=lambda c: c._name)
def test_runs_on_a_continuous_env_and_survives_a_checkpoint(cls, tmp_path):
    config = dict(FAST, **SMALL[cls._name])
    trainer = cls(env="Pendulum-v1", config=config, logdir=str(tmp_path / "a"))
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > 0 and result["num_env_steps_trained"] > 0
        for key in ("episode_reward_mean", "episodes_total", "timesteps_this_iter", "training_iteration",
                    "num_healthy_workers", "info", "sampler_perf", "time_this_iter_s"):
            assert key in result, key
        if cls in (ImpalaTrainer, APPOTrainer):
            info = result["info"]
            assert {"learner_queue", "policy_lag", "learner_throughput"} <= set(info)
            assert info["learner_queue"]["capacity"] == 16 and info["num_weight_versions"] > 0
        # The learner thread keeps learning between two calls; pausing it makes them agree.
        with getattr(trainer, "learner_paused", contextlib.nullcontext)():
            path = trainer.save()
            weights = trainer.get_weights()[DEFAULT_POLICY_ID]
    finally:
        trainer.stop()
    restored = cls.from_checkpoint(path, logdir=str(tmp_path / "b"))
    try:
        assert restored.iteration == 2
        for name, value in restored.get_weights()[DEFAULT_POLICY_ID].items():
            np.testing.assert_array_equal(value, weights[name])
        if cls is APPOTrainer:
            policy = restored.get_policy()
            target = {k: v.numpy() for k, v in policy.target_model.state_dict().items()}
            assert set(target) == set(weights)
        assert restored.train()["training_iteration"] == 3
    finally:
        restored.stop()


@pytest.mark.parametrize("cls", [A3CTrainer, ImpalaTrainer, APPOTrainer], ids=lambda c: c._name)
def test_multi_agent_trains_only_policies_to_train(cls, tmp_path):
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    config = dict(FAST, **SMALL[cls._name], env_config={"num_agents": 2}, multiagent={
        "policies": {"p0", "p1"}, "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        "policies_to_train": ["p0"]})
    trainer = cls(env=MultiAgentCartPole, config=config, logdir=str(tmp_path))
    try:
        p1_before = trainer.get_weights(["p1"])["p1"]
        p0_before = trainer.get_weights(["p0"])["p0"]
        # The learner thread (IMPALA, APPO) may not have learned yet after 3 iterations on a busy machine.
        for _ in range(30):
            result = trainer.train()
            if result["training_iteration"] >= 3 and result["info"]["learner"]:
                break
        assert set(result["info"]["learner"]) == {"p0"}
        assert set(result["policy_reward_mean"]) == {"p0", "p1"}
        for name, value in trainer.get_weights(["p1"])["p1"].items():
            np.testing.assert_array_equal(value, p1_before[name])
        assert any(not np.array_equal(v, p0_before[k]) for k, v in trainer.get_weights(["p0"])["p0"].items())
    finally:
        trainer.stop()


def test_impala_replay_and_minibatch_buffer(tmp_path):
    config = dict(FAST, replay_proportion=1.0, replay_buffer_num_slots=4, minibatch_buffer_size=2, num_sgd_iter=2,
                  rollout_fragment_length=50, train_batch_size=100)
    trainer = ImpalaTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path))
    try:
        for _ in range(3):
            result = trainer.train()
        # Replay doubles what the learner sees; each train batch is learned on twice.
        assert result["num_env_steps_trained"] > 2 * result["num_env_steps_sampled"] - 4 * 100
    finally:
        trainer.stop()


@pytest.mark.parametrize("cls", [ImpalaTrainer, APPOTrainer], ids=lambda c: c._name)
def test_local_worker_gives_the_learner_a_turn_per_train_batch(cls, tmp_path):
    # Tiny fragments make the loop take the shared lock again within microseconds; the learner
    # thread must still learn on each train batch before the next one is sampled.
    config = dict(FAST, rollout_fragment_length=16, train_batch_size=32)
    trainer = cls(env="CartPole-v1", config=config, logdir=str(tmp_path))
    try:
        for iteration in range(1, 13):
            result = trainer.train()
            assert result["num_env_steps_trained"] >= 32 * (iteration // 2), iteration
    finally:
        trainer.stop()


# --- remote workers on a real Ray ---------------------------------------------------------
def test_impala_with_remote_workers_reports_lag_and_survives_a_killed_worker(ray_session, tmp_path):
    config = dict(FAST, num_workers=2, num_cpus_per_worker=0.5, rollout_fragment_length=25, train_batch_size=100,
                  min_iter_time_s=1, recreate_failed_workers=True)
    trainer = ImpalaTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path))
    try:
        result = trainer.train()
        assert result["num_healthy_workers"] == 2 and result["timesteps_total"] > 0
        assert result["info"]["policy_lag"]["batches"] > 0
        assert result["info"]["num_weight_versions"] > 0
        ray_session.kill(trainer.workers.remote_workers()[0])
        result = trainer.train()
        assert result["num_healthy_workers"] == 2
        assert trainer.workers.remote_worker_indices() == [1, 2]
        trained = result["num_env_steps_trained"]
        assert trainer.train()["num_env_steps_trained"] > trained
    finally:
        trainer.stop()


def test_a3c_with_remote_workers_applies_their_gradients(ray_session, tmp_path):
    config = dict(FAST, num_workers=2, num_cpus_per_worker=0.5, grads_per_step=6)
    trainer = A3CTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path))
    try:
        before = trainer.get_weights()[DEFAULT_POLICY_ID]
        result = trainer.train()
        assert result["num_healthy_workers"] == 2
        assert result["num_env_steps_sampled"] >= 6 * 10 * 1
        after = trainer.get_weights()[DEFAULT_POLICY_ID]
        assert any(not np.array_equal(after[k], before[k]) for k in before)
        assert "grad_gnorm" in result["info"]["learner"][DEFAULT_POLICY_ID]["learner_stats"]
    finally:
        trainer.stop()
