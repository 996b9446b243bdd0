"""Seeded learning tests from tuned_examples/ (slow), and a quick Box-action smoke run."""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.registry import get_trainer_class

TUNED = Path(__file__).resolve().parents[1] / "tuned_examples"


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # The nets here are tiny: torch's intra-op threads buy nothing, and on a busy 2-core
    # machine their spin-waiting made PPO ~20x slower (10 s instead of 0.4 s per iteration).
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _load(relpath: str) -> dict:
    (exp,) = yaml.safe_load((TUNED / relpath).read_text()).values()
    return exp


def _run_until(exp: dict, logdir: str):
    """Trains `exp` until its reward threshold or its timestep budget; returns the history."""
    trainer = get_trainer_class(exp["run"])(config=exp["config"], env=exp["env"], logdir=logdir)
    target, budget = exp["stop"]["episode_reward_mean"], exp["stop"]["timesteps_total"]
    history = []
    start = time.time()
    try:
        while True:
            r = trainer.train()
            history.append((r["timesteps_total"], r["episode_reward_mean"]))
            if r["episode_reward_mean"] >= target or r["timesteps_total"] >= budget:
                break
    finally:
        trainer.stop()
    return history, time.time() - start


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ppo_cartpole_tuned_example(tmp_path):
    exp = _load("ppo/cartpole-ppo.yaml")
    assert exp["run"] == "PPO" and exp["env"] == "CartPole-v1" and exp["config"]["seed"] == 0
    history, took = _run_until(exp, str(tmp_path))
    steps, reward = history[-1]
    print(f"PPO CartPole: {reward:.1f} after {steps} steps, {len(history)} iterations, {took:.1f} s")
    assert reward >= 450, f"PPO reached only {reward:.1f} in {steps} steps: {history[-5:]}"
    assert steps <= 200_000


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pg_cartpole_tuned_example(tmp_path):
    exp = _load("pg/cartpole-pg.yaml")
    assert exp["run"] == "PG" and exp["config"]["seed"] == 0
    history, took = _run_until(exp, str(tmp_path))
    steps, reward = history[-1]
    print(f"PG CartPole: {reward:.1f} after {steps} steps, {len(history)} iterations, {took:.1f} s")
    assert reward >= 150, f"PG reached only {reward:.1f} in {steps} steps: {history[-5:]}"
    assert steps <= 200_000


def test_ppo_pendulum_smoke(tmp_path):
    trainer = PPOTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={
        "seed": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 100, "train_batch_size": 400,
        "sgd_minibatch_size": 100, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [32, 32]}})
    try:
        policy = trainer.get_policy()
        before = policy.get_weights()
        for i in (1, 2):
            r = trainer.train()
            assert r["training_iteration"] == i and r["timesteps_total"] == 400 * i
            stats = r["info"]["learner"]["default_policy"]["learner_stats"]
            for key in ("total_loss", "policy_loss", "vf_loss", "kl", "entropy"):
                assert math.isfinite(stats[key]), (key, stats[key])
        # Pendulum episodes last 200 steps (time limit): 4 of them in 800 steps over 2 envs.
        assert r["episodes_total"] == 4 and r["episode_len_mean"] == 200
        assert np.isfinite(r["episode_reward_mean"])
        after = policy.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in after)
        action = trainer.compute_single_action(np.array([1.0, 0.0, 0.0], np.float32), explore=False)
        assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0
    finally:
        trainer.stop()
