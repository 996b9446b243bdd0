"""LinUCB and LinTS: the online linear models against NumPy, regret on the example bandits,
checkpoints, remote workers and config errors."""
from __future__ import annotations

from typing import List

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.bandits import (BanditLinTSTrainer, BanditLinUCBTrainer, DisjointLinearModels,
                                        LinearBanditPolicy)
from rlfleet.env.examples.bandits import LinearContextualBandit, WheelBandit
from rlfleet.registry import get_trainer_class
from tests.helpers import load_tuned_example


# --- the linear models ----------------------------------------------------------------
def test_sherman_morrison_updates_match_a_direct_ridge_regression():
    rng = np.random.default_rng(0)
    models = DisjointLinearModels(num_arms=3, dim=4, lambda_=0.5)
    x, arms, r = rng.standard_normal((60, 4)), rng.integers(0, 3, 60), rng.standard_normal(60)
    models.update(x[:30], arms[:30], r[:30])
    models.update(x[30:], arms[30:], r[30:])
    for k in range(3):
        xs, rs = x[arms == k], r[arms == k]
        a = 0.5 * np.eye(4) + xs.T @ xs
        np.testing.assert_allclose(models.a_inv[k], np.linalg.inv(a), atol=1e-10)
        np.testing.assert_allclose(models.theta()[k], np.linalg.solve(a, xs.T @ rs), atol=1e-10)
    assert models.counts.tolist() == [int((arms == k).sum()) for k in range(3)]


def test_ucb_adds_alpha_standard_deviations_and_thompson_draws_around_the_estimate():
    rng = np.random.default_rng(1)
    models = DisjointLinearModels(num_arms=2, dim=3)
    models.update(rng.standard_normal((20, 3)), rng.integers(0, 2, 20), rng.standard_normal(20))
    x = rng.standard_normal((5, 3))
    width = np.sqrt(np.stack([np.einsum("bi,ij,bj->b", x, models.a_inv[k], x) for k in range(2)], axis=1))
    np.testing.assert_allclose(models.ucb_scores(x, 2.0), models.mean_scores(x) + 2.0 * width)
    draws = np.stack([models.thompson_scores(x[:1], rng, scale=3.0)[0] for _ in range(4000)])
    np.testing.assert_allclose(draws.mean(axis=0), models.mean_scores(x[:1])[0], atol=0.15)
    np.testing.assert_allclose(draws.std(axis=0), 3.0 * width[0], rtol=0.1)


# --- regret -----------------------------------------------------------------------------
def _regret_per_1k(trainer, steps: int = 10000) -> List[float]:
    regrets = []
    while trainer.counters["num_env_steps_sampled"] < steps:
        result = trainer.train()
        regrets.append(result["regret"])
    assert result["cumulative_regret"] == pytest.approx(sum(regrets))
    return regrets


def _trainer(relpath: str, tmp_path, trainer_class=None, **overrides):
    example = load_tuned_example(relpath)
    cls = trainer_class or get_trainer_class(example.run)
    return cls(config=dict(example.config, **overrides), env=example.env, logdir=str(tmp_path))


@pytest.mark.parametrize("relpath", ["bandits/linear-linucb.yaml", "bandits/linear-lints.yaml"])
def test_regret_on_the_linear_bandit_grows_sublinearly(relpath, tmp_path):
    # Seed 1: no tuned example runs it (they use 0). Regret per 1k steps: the file reports
    # every 10 steps (so that its first iteration shows the start of learning).
    trainer = _trainer(relpath, tmp_path, seed=1, timesteps_per_iteration=1000)
    try:
        regrets = _regret_per_1k(trainer)
    finally:
        trainer.stop()
    assert len(regrets) == 10
    assert regrets[-1] <= 0.1 * regrets[0], regrets


class EpsilonGreedyLinearPolicy(LinearBanditPolicy):
    """The baseline: the same per-arm linear models, acting greedily on their estimates
    except for a uniformly random arm with probability 0.1."""

    def exploration_scores(self, contexts: np.ndarray) -> np.ndarray:
        scores = self.models.mean_scores(contexts)
        random = self.np_random.random(len(contexts)) < 0.1
        scores[random] = self.np_random.random((int(random.sum()), scores.shape[1]))
        return scores


def test_linear_bandits_beat_epsilon_greedy_on_the_wheel(tmp_path):
    # Seeds 0-2 all pass (see the README's bandit section); CI runs seed 0, the files'.
    regret = {}
    for relpath in ("bandits/wheel-linucb.yaml", "bandits/wheel-lints.yaml"):
        trainer = _trainer(relpath, tmp_path / relpath)
        try:
            regret[relpath] = sum(_regret_per_1k(trainer))
        finally:
            trainer.stop()
    baseline_class = BanditLinTSTrainer.with_updates(name="EpsilonGreedy", default_policy=EpsilonGreedyLinearPolicy)
    baseline = _trainer("bandits/wheel-lints.yaml", tmp_path / "baseline", trainer_class=baseline_class)
    try:
        regret["epsilon-greedy"] = sum(_regret_per_1k(baseline))
    finally:
        baseline.stop()
    assert max(regret["bandits/wheel-linucb.yaml"], regret["bandits/wheel-lints.yaml"]) < (
        0.5 * regret["epsilon-greedy"]), regret


# --- the trainer ------------------------------------------------------------------------
def test_checkpoint_restores_models_regret_and_the_posterior_draws(tmp_path):
    config = {"seed": 3, "timesteps_per_iteration": 50}
    trainer = BanditLinTSTrainer(config, env=LinearContextualBandit, logdir=str(tmp_path / "a"))
    trainer.train()
    path = trainer.save()
    restored = BanditLinTSTrainer(config, env=LinearContextualBandit, logdir=str(tmp_path / "b"))
    try:
        restored.restore(path)
        for name, array in trainer.get_policy().get_weights().items():
            np.testing.assert_array_equal(restored.get_policy().get_weights()[name], array)
        obs = np.ones(4, np.float32)
        actions = [[t.compute_single_action(obs, explore=True) for _ in range(20)] for t in (trainer, restored)]
        assert actions[0] == actions[1]
        assert restored.train()["cumulative_regret"] > trainer._cumulative_regret > 0
    finally:
        trainer.stop()
        restored.stop()


def test_greedy_action_is_the_best_estimated_arm(tmp_path):
    trainer = BanditLinUCBTrainer({"seed": 0}, env=LinearContextualBandit, logdir=str(tmp_path))
    try:
        for _ in range(5):
            trainer.train()
        env = LinearContextualBandit()
        contexts = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
        greedy = [trainer.compute_single_action(x, explore=False) for x in contexts]
        # 500 steps of LinUCB pick the truly best arm for nearly every context.
        assert np.mean(np.array(greedy) == (contexts @ env.thetas.T).argmax(axis=1)) >= 0.9
    finally:
        trainer.stop()


def test_remote_workers_report_regret_and_get_the_updated_models(ray_session, tmp_path):
    trainer = BanditLinUCBTrainer({"seed": 0, "num_workers": 1, "timesteps_per_iteration": 20},
                                  env=WheelBandit, logdir=str(tmp_path))
    try:
        result = trainer.train()
        assert result["regret"] >= 0 and result["timesteps_total"] >= 20
        local = trainer.get_policy().get_weights()["counts"]
        _, remote = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights()["counts"])
        assert local.sum() >= 20 and remote.tolist() == local.tolist()
    finally:
        trainer.stop()


def test_bandits_name_the_space_or_key_that_does_not_fit(tmp_path):
    with pytest.raises(ValueError, match="Discrete action space"):
        BanditLinUCBTrainer({}, env="Pendulum-v1", logdir=str(tmp_path / "a"))
    with pytest.raises(ValueError, match="alpha"):
        BanditLinUCBTrainer({"alpha": -1}, env=WheelBandit, logdir=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="Unknown config key 'alpha'"):  # LinUCB's key, not LinTS's
        BanditLinTSTrainer({"alpha": 1.0}, env=WheelBandit, logdir=str(tmp_path / "c"))
    with pytest.raises(ValueError, match="delta"):
        WheelBandit({"delta": 1.5})
    assert isinstance(WheelBandit().observation_space, gym.spaces.Box)
