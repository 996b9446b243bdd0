"""Resuming a run from Python: `Trainer(config, logdir=run_dir).restore(run_dir)` takes the
newest intact checkpoint (skipping a damaged one), rewinds the folder's logs to it, and goes on
as the uninterrupted run did (`save(continue_from_checkpoint=True)`)."""
from __future__ import annotations

import json
import logging
import os

from rlfleet.algorithms.ppo import PPOTrainer

CONFIG = {"seed": 5, "num_envs_per_worker": 2, "rollout_fragment_length": 50, "train_batch_size": 200,
          "sgd_minibatch_size": 64, "num_sgd_iter": 2, "observation_filter": "MeanStdFilter",
          "model": {"fcnet_hiddens": [16]}}


def _weights(trainer):
    return {k: v.tobytes() for k, v in trainer.get_weights()["default_policy"].items()}


def test_restore_from_the_run_folder_continues_the_run(tmp_path, caplog):
    run_dir = str(tmp_path / "run")
    a = PPOTrainer(config=CONFIG, env="CartPole-v1", logdir=run_dir)
    weights = {}
    for i in range(1, 5):
        a.train()
        if i in (2, 3):
            a.save(continue_from_checkpoint=True)
        weights[i] = _weights(a)
    a.stop()  # as a run killed after iteration 4: its logs run on past its last checkpoint

    # The newest checkpoint is damaged: the one before it is taken, with a warning naming it.
    with open(os.path.join(run_dir, "checkpoint_3", "policies", "default_policy", "weights.safetensors"), "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"\0\0\0\0")
    b = PPOTrainer(config=CONFIG, env="CartPole-v1", logdir=run_dir)
    with caplog.at_level(logging.WARNING, logger="rlfleet"):
        b.restore(run_dir)
    assert "Skipping the damaged checkpoint" in caplog.text and "checkpoint_3" in caplog.text
    assert b.iteration == 2 and _weights(b) == weights[2]
    for i in (3, 4):
        b.train()
        if i == 3:
            b.save(continue_from_checkpoint=True)  # replaces the damaged one
        assert _weights(b) == weights[i], i  # bit-identical to the uninterrupted run
    b.stop()
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "result.json"))]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3, 4]
