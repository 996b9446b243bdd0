"""ES and ARS: the shared pieces against NumPy (ranks, noise sums, the flat policy), the
updates on a fixed batch, checkpoints, acting and export, remote workers sharing one noise
table, and a killed worker's directions re-issued."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.ars import ARSTrainer
from rlfleet.algorithms.es import ESTrainer
from rlfleet.algorithms.evolution import (Collection, FlatMLPActor, RolloutResult, SharedNoiseTable, centered_ranks,
                                          get_flat, make_noise, set_flat, weighted_noise_sum)
from rlfleet.trainer.fault_tolerance import WorkerFailureError
from tests.helpers import REPO_ROOT, train_until
from tests.algorithm_cases import ACTION_SPACES, ActionSpaceEnv

TINY = {"seed": 0, "noise_size": 100_000, "model": {"fcnet_hiddens": [8]}}
TINY_ES = {**TINY, "episodes_per_batch": 8, "train_batch_size": 50, "eval_prob": 0.5}
TINY_ARS = {**TINY, "num_rollouts": 8, "rollouts_used": 4, "eval_prob": 0.5}


# --- the shared pieces --------------------------------------------------------------
def test_centered_ranks_spread_the_order_over_minus_half_to_half():
    np.testing.assert_allclose(centered_ranks(np.array([[3.0, 1.0], [2.0, 10.0]])), [[1 / 6, -0.5], [-1 / 6, 0.5]])
    assert centered_ranks(np.array([5.0])).tolist() == [0.0]


def test_weighted_noise_sum_is_the_sum_of_weighted_slices():
    noise = SharedNoiseTable(make_noise(1000, seed=3))
    indices, weights = np.array([0, 17, 500, 990]), np.array([0.5, -1.0, 2.0, 0.25])
    want = sum(w * noise.noise[i:i + 10].astype(np.float64) for w, i in zip(weights, indices))
    np.testing.assert_allclose(weighted_noise_sum(weights, indices, noise, 10, batch_size=3), want, atol=1e-6)
    assert np.array_equal(make_noise(1000, seed=3), noise.noise) and not np.array_equal(make_noise(1000, 4), noise.noise)
    assert (noise.sample_indices(np.random.default_rng(0), 10, 500) <= 990).all()
    with pytest.raises(ValueError, match="noise_size=1000 is smaller than the policy's 2000 parameters"):
        noise.sample_indices(np.random.default_rng(0), 2000, 1)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_the_numpy_actor_acts_as_the_torch_policy_on_the_same_theta(env, tmp_path):
    trainer = ESTrainer(dict(TINY, model={"fcnet_hiddens": [16, 8]}), env=env, logdir=str(tmp_path))
    try:
        policy = trainer.get_policy()
        theta = np.random.default_rng(0).standard_normal(trainer.num_params).astype(np.float32)
        set_flat(policy.model, theta, "ES")
        np.testing.assert_array_equal(get_flat(policy.model, "ES"), theta)
        actor = FlatMLPActor(trainer._layout, theta)
        for obs in np.random.default_rng(1).standard_normal((20, policy.observation_space.shape[0])):
            obs = obs.astype(np.float32)
            dist_inputs = policy.model({"obs": torch.as_tensor(obs[None])}, [], None)[0][0].detach().numpy()
            mine = actor(obs)
            if env == "CartPole-v1":
                assert mine == int(dist_inputs.argmax())
            else:
                np.testing.assert_allclose(mine, dist_inputs[:1], rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


def _fixed_batch(trainer, returns: np.ndarray) -> Collection:
    batch = trainer._new_collection(len(returns), lambda b: False, max_directions=len(returns))
    task = batch.next_task()
    batch.add(RolloutResult(1, task.indices, returns, np.full(returns.shape, 10), np.zeros(0), np.zeros(0, np.int64)))
    return batch


def test_es_update_is_adam_on_the_rank_weighted_noise_with_weight_decay(tmp_path):
    trainer = ESTrainer(TINY_ES, env="CartPole-v1", logdir=str(tmp_path))
    try:
        returns = np.array([[1.0, 3.0], [7.0, 2.0], [4.0, 4.5]])
        batch = _fixed_batch(trainer, returns)
        theta = trainer.theta.copy()
        trainer.update(batch)
        ranks = np.array([[0, 2], [5, 1], [3, 4]]) / 5 - 0.5
        eps = np.stack([trainer.noise.noise[i:i + trainer.num_params] for i in batch.indices]).astype(np.float64)
        g = (ranks[:, 0] - ranks[:, 1]) @ eps / 6
        grad = -g + 0.005 * theta
        m, v = 0.1 * grad, 0.001 * grad ** 2
        step = -0.01 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)  # Adam's first step
        np.testing.assert_allclose(trainer.theta, theta + step, rtol=1e-5, atol=1e-7)
    finally:
        trainer.stop()


def test_ars_update_uses_the_top_directions_scaled_by_their_spread(tmp_path):
    trainer = ARSTrainer(dict(TINY_ARS, offset=1.0), env="CartPole-v1", logdir=str(tmp_path))
    try:
        returns = np.array([[11.0, 13.0], [17.0, 12.0], [14.0, 14.5], [10.0, 10.0]])
        batch = _fixed_batch(trainer, returns)
        theta = trainer.theta.copy()
        stats = trainer.update(batch)
        shifted = returns - 10  # offset 1 per step, 10 steps
        used = shifted[[1, 2]]  # the better half (rollouts_used 4 of num_rollouts 8) by max return
        eps = np.stack([trainer.noise.noise[i:i + trainer.num_params] for i in batch.indices[[1, 2]]])
        g = (used[:, 0] - used[:, 1]) @ eps.astype(np.float64) / 2 / used.std()
        np.testing.assert_allclose(trainer.theta, theta + 0.01 * 0.1 * g, rtol=1e-6)
        assert stats["directions_used"] == 2
    finally:
        trainer.stop()


# --- the trainers ---------------------------------------------------------------------
@pytest.mark.parametrize("cls,config", [(ESTrainer, TINY_ES), (ARSTrainer, TINY_ARS)])
def test_checkpoint_restores_theta_optimizer_filter_and_history(cls, config, tmp_path):
    trainer = cls(config, env="CartPole-v1", logdir=str(tmp_path / "a"))
    restored = cls(config, env="CartPole-v1", logdir=str(tmp_path / "b"))
    try:
        trainer.train()
        first = trainer.train()
        assert first["info"]["bytes_received_this_iter"] > 0 and first["timesteps_total"] > 0
        restored.restore(trainer.save())
        np.testing.assert_array_equal(restored.theta, trainer.theta)
        want, got = trainer.get_state(), restored.get_state()
        for name, value in want["evolution"]["optimizer"].items():
            np.testing.assert_array_equal(got["evolution"]["optimizer"][name], value)
        for name in ("eval_counts", "eval_returns", "eval_lengths"):
            np.testing.assert_array_equal(got["evolution"][name], want["evolution"][name])
        assert got["evolution"]["rng"] == want["evolution"]["rng"]
        filters = [t.workers.local_worker().filters["default_policy"].get_state() for t in (trainer, restored)]
        np.testing.assert_array_equal(filters[1]["rs_mean"], filters[0]["rs_mean"])
        assert filters[1]["rs_n"] == filters[0]["rs_n"] > 0
        obs = np.array([0.01, -0.02, 0.03, 0.0], np.float32)
        assert trainer.compute_single_action(obs) == restored.compute_single_action(obs)
        after = restored.train()
        assert after["training_iteration"] == 3 and after["timesteps_total"] > first["timesteps_total"]
    finally:
        trainer.stop()
        restored.stop()


def test_the_trained_policy_acts_and_exports_with_theta(tmp_path):
    trainer = ARSTrainer(dict(TINY_ARS, model={"fcnet_hiddens": []}, evaluation_interval=1, evaluation_num_episodes=1),
                         env="Pendulum-v1", logdir=str(tmp_path))
    try:
        assert trainer.train()["evaluation"]["episodes_this_iter"] == 1
        obs = np.array([1.0, 0.0, 0.5], np.float32)
        filtered = trainer.workers.local_worker().filters["default_policy"](obs, update=False)
        want = np.clip(FlatMLPActor(trainer._layout, trainer.theta.astype(np.float32))(filtered), -1, 1) * 2.0
        np.testing.assert_allclose(trainer.compute_single_action(obs), want, rtol=1e-5, atol=1e-6)
        assert trainer.num_params == 3 * 2 + 2  # linear: (mean, log-std) outputs from 3 features
        # The export takes raw observations (the filter's statistics are in the graph).
        model = torch.jit.load(trainer.export_policy_model(str(tmp_path / "ts")))
        actions, dist_inputs = model(torch.as_tensor(obs[None]))[:2]
        np.testing.assert_allclose(dist_inputs.detach().numpy()[0, :1],
                                   FlatMLPActor(trainer._layout, trainer.theta)(filtered), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(actions.detach().numpy()[0], want, rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


def test_settings_that_do_not_fit_are_named(tmp_path):
    with pytest.raises(ValueError, match="rollouts_used=9 is more than num_rollouts=8"):
        ARSTrainer(dict(TINY_ARS, rollouts_used=9), env="CartPole-v1", logdir=str(tmp_path / "a"))
    with pytest.raises(ValueError, match="fast_path='off'"):
        ESTrainer(dict(TINY_ES, fast_path="off"), env="CartPole-v1", logdir=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="noise_size=10 is smaller"):
        ESTrainer(dict(TINY_ES, noise_size=10), env="CartPole-v1", logdir=str(tmp_path / "c"))
    with pytest.raises(ValueError, match="Discrete or Box action spaces"):
        ESTrainer(dict(TINY_ES, env_config={"action_space": ACTION_SPACES["MultiDiscrete"]}), env=ActionSpaceEnv,
                  logdir=str(tmp_path / "d"))
    with pytest.raises(ValueError, match="return_proc_mode"):
        ESTrainer(dict(TINY_ES, return_proc_mode="raw"), env="CartPole-v1", logdir=str(tmp_path / "e"))


# --- remote workers -------------------------------------------------------------------
def test_remote_workers_map_one_noise_table_and_send_returns_only(ray_session, tmp_path):
    trainer = ESTrainer(dict(TINY_ES, num_workers=2), env="CartPole-v1", logdir=str(tmp_path))
    try:
        result = trainer.train()
        assert result["num_healthy_workers"] == 2
        handles = trainer.pool.worker_handles()
        # Zero-copy: each worker's table is a read-only view of the object store's one copy.
        flags = ray_session.get([h.__ray_call__.remote(lambda w: (w.noise.noise.flags.writeable,
                                                                  w.noise.noise.flags.owndata)) for h in handles.values()])
        assert flags == [(False, False), (False, False)]
        assert not trainer.noise.noise.flags.writeable  # the trainer reads the same copy
        # What came back: per direction 2 returns + 2 lengths + an index (40 bytes), the
        # evaluation episodes' 16 bytes each, and the filter statistics (~150 bytes per task).
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats["eval_episodes"] >= 2  # min_eval_episodes' default: one per worker
        directions = stats["noisy_episodes"] // 2
        assert result["info"]["bytes_received_this_iter"] < 40 * directions + 16 * 100 + 400 * directions
    finally:
        trainer.stop()


def _kill(ray, handle) -> None:
    """Kills a perturbation worker and waits until it is gone (the kill is asynchronous)."""
    ray.kill(handle)
    with pytest.raises(ray.exceptions.RayActorError):
        for _ in range(100):
            ray.get(handle.__ray_call__.remote(lambda worker: None), timeout=30)


def test_a_killed_workers_directions_are_reissued(ray_session, tmp_path):
    config = dict(TINY_ARS, num_workers=2, num_rollouts=16, rollouts_used=16, recreate_failed_workers=True)
    trainer = ARSTrainer(config, env="CartPole-v1", logdir=str(tmp_path))
    try:
        trainer.train()
        _kill(ray_session, trainer.pool.worker_handles()[1])
        result = trainer.train()
        assert trainer.pool.tasks_reissued == 1
        # All 8 directions came back, the dead worker's re-run by its replacement.
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["directions_used"] == 8
        assert result["num_healthy_workers"] == 2
    finally:
        trainer.stop()
    strict = ARSTrainer(dict(config, num_workers=1, recreate_failed_workers=False), env="CartPole-v1",
                        logdir=str(tmp_path / "s"))
    try:
        _kill(ray_session, strict.pool.worker_handles()[1])
        with pytest.raises(WorkerFailureError, match="recreate_failed_workers"):
            strict.train()
    finally:
        strict.stop()


# --- a stop on the step count ---------------------------------------------------------
@pytest.mark.parametrize("cls,config", [
    # One ES iteration needs 10,000 perturbed steps (and 100 episodes); ARS's 200 directions
    # take ~8,000 steps on CartPole (episodes of ~20 steps).
    (ESTrainer, {**TINY, "episodes_per_batch": 100, "train_batch_size": 10_000}),
    (ARSTrainer, {**TINY, "num_rollouts": 400, "rollouts_used": 200}),
], ids=["ES", "ARS"])
def test_a_step_limit_cuts_the_iteration_within_ten_percent(cls, config, tmp_path):
    trainer = cls(config, env="CartPole-v1", logdir=str(tmp_path))
    try:
        trainer.set_step_limit(2000)
        result = trainer.train()
        assert 2000 <= result["timesteps_total"] <= 2200, result["timesteps_total"]
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["noisy_episodes"] > 0  # it learned
    finally:
        trainer.stop()


# --- learning (seeds and settings no tuned example uses) --------------------------------
@pytest.mark.parametrize("cls,config,reward", [
    # The reference's ES settings in one process (its eval_prob 0.3 % too: the
    # min_eval_episodes floor measures episode_reward_mean every iteration), seed 5: with
    # seeds 3 and 4 the initial 256x256 policy already balances the pole (500 and 302).
    (ESTrainer, {"seed": 5, "episodes_per_batch": 50, "noise_size": 5_000_000}, 100),
    # ARS with a small MLP policy (the tuned example is linear), seed 3.
    (ARSTrainer, {"seed": 3, "num_rollouts": 50, "rollouts_used": 25, "noise_size": 5_000_000, "eval_prob": 0.5,
                  "model": {"fcnet_hiddens": [16]}}, 150),
], ids=["ES", "ARS-mlp"])
def test_learns_cartpole_in_process(cls, config, reward, tmp_path):
    trainer = cls(config, env="CartPole-v1", logdir=str(tmp_path))
    try:
        result, history = train_until(trainer, reward=reward, max_timesteps=500_000)
    finally:
        trainer.stop()
    assert history[0][1] < reward, f"the initial policy already scores {history[0][1]}: nothing learned"
    assert result["episode_reward_mean"] >= reward, history


def test_the_swimmer_case_builds_and_trains_an_iteration(tmp_path, monkeypatch):
    # benchmarks/zoo_cases/swimmer-ars.yaml (too long for CI: see its header); skipped
    # without MuJoCo.
    pytest.importorskip("mujoco", reason="MuJoCo is not installed (pip install mujoco)")
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warnings to ./MUJOCO_LOG.TXT
    from tests.helpers import load_tuned_example

    example = load_tuned_example(REPO_ROOT / "benchmarks/zoo_cases/swimmer-ars.yaml")
    trainer = ARSTrainer(dict(example.config, num_workers=0, noise_size=100_000), env=example.env,
                         logdir=str(tmp_path / "run"))
    try:
        assert trainer.num_params == 8 * 4 + 4  # linear: 8 features -> (mean, log-std) of 2 actions
        result = trainer.train()
        assert result["timesteps_total"] >= 8000  # four directions, both signs, 1000-step episodes
    finally:
        trainer.stop()
