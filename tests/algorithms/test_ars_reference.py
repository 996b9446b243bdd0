"""ARS against a NumPy restatement of the paper's algorithm (benchmarks/ars_reference.py,
Mania et al. 2018, Alg. 2): one iteration of rlfleet's ARS, with a linear policy and no
state normalisation (V1-t), plays the same episodes and takes the same step as the
reference does from the same directions, reset seeds and parameters."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from benchmarks import ars_reference as ref
from rlfleet.algorithms.ars import ARSTrainer
from rlfleet.utils.seeding import derive_seed


def test_reference_step_is_the_papers_update():
    theta = np.array([[0.5, -1.0]])
    deltas = np.array([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]])
    r_plus, r_minus = np.array([3.0, 1.0, 6.0]), np.array([1.0, 2.0, 2.0])
    # top 2 by max(r+, r-): directions 2 (6) and 0 (3); sigma_R = std([6, 3, 2, 1])
    sigma = np.std([6.0, 3.0, 2.0, 1.0])
    want = theta + 0.1 / (2 * sigma) * ((6 - 2) * deltas[2] + (3 - 1) * deltas[0])
    np.testing.assert_allclose(ref.ars_step(theta, deltas, r_plus, r_minus, alpha=0.1, top=2), want)


@pytest.mark.parametrize("directions,used", [(1, 1), (4, 2)])
def test_one_iteration_matches_the_reference(directions, used, tmp_path):
    config = {"seed": 3, "num_workers": 0, "noise_size": 100_000, "noise_stdev": 0.05, "sgd_stepsize": 0.02,
              "sgd_momentum": 0.0, "num_rollouts": 2 * directions, "rollouts_used": 2 * used, "eval_prob": 0.0,
              "observation_filter": "NoFilter", "normalize_actions": False, "model": {"fcnet_hiddens": []}}
    trainer = ARSTrainer(config, env="Pendulum-v1", logdir=str(tmp_path))
    try:
        theta = np.random.default_rng(0).normal(0.0, 0.5, trainer.num_params).astype(np.float32)
        trainer.theta = theta.copy()
        batches = []
        update = trainer.update
        trainer.update = lambda batch: batches.append(batch) or update(batch)
        trainer.train()
        batch, = batches
    finally:
        trainer.stop()
    layout = trainer._layout
    (out, inp), = layout.shapes

    def linear(vector):  # the acting rows of [W | b]: the action's mean
        w, b = vector[:out * inp].reshape(out, inp), vector[out * inp:]
        return lambda x: (w @ x + b)[:layout.action_dim]

    # The reference, from the same directions, on the worker's env with the same reset seed.
    env = gym.make("Pendulum-v1")
    first_seed = derive_seed(3, 0, "env") & 0xFFFFFFFF
    deltas = np.stack([trainer.noise.get(int(i), trainer.num_params) for i in batch.indices])
    returns = np.zeros((len(deltas), 2))
    for k, delta in enumerate(deltas):
        for col, sign in enumerate((1.0, -1.0)):
            policy = linear(theta + np.float32(sign * 0.05) * delta)
            returns[k, col], _ = ref.episode(env, policy, None, horizon=200, seed=first_seed)
            first_seed = None
    assert len(batch.indices) == directions
    np.testing.assert_allclose(batch.returns, returns, rtol=1e-4)
    want = ref.ars_step(theta.astype(np.float64), deltas.astype(np.float64), returns[:, 0], returns[:, 1],
                        alpha=0.02, top=used)
    np.testing.assert_allclose(trainer.theta, want, rtol=1e-4, atol=1e-6)
