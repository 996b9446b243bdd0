"""Fixtures of the results tests: a small sweep of real runs (2 settings x 2 seeds)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

SWEEP_LRS = (3e-4, 3e-5)
SWEEP_SEEDS = (1, 2)
SWEEP_ITERATIONS = 6


@pytest.fixture(scope="session")
def sweep(tmp_path_factory) -> Path:
    """A folder of 4 finished `rlfleet train` runs of PPO on CartPole: lr 3e-4 and 3e-5, seeds
    1 and 2, 6 iterations of 400 steps each, a checkpoint at the end."""
    from rlfleet.cli import main

    root = tmp_path_factory.mktemp("sweep")
    for lr in SWEEP_LRS:
        for seed in SWEEP_SEEDS:
            config = {"train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 4, "lr": lr, "seed": seed}
            code = main(["train", "--run", "PPO", "--env", "CartPole-v1", "-q", "--checkpoint-at-end",
                         "--stop", json.dumps({"training_iteration": SWEEP_ITERATIONS}),
                         "--config", json.dumps(config), "--local-dir", str(root)])
            assert code == 0
    return root
