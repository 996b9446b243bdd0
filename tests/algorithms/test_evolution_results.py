"""ES and ARS results: every iteration evaluates the current (unperturbed) policy at least
`min_eval_episodes` times, so `episode_reward_mean` is measured from the first iteration on,
and mean, min and max are over one window of episodes (the mean within [min, max])."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlfleet.algorithms.ars import ARSTrainer
from rlfleet.algorithms.es import ESTrainer
from rlfleet.algorithms.evolution import Collection, SharedNoiseTable, make_noise
from rlfleet.algorithms.evolution.eval_window import EvalWindow

TINY = {"seed": 4, "num_workers": 0, "noise_size": 50_000, "model": {"fcnet_hiddens": [8]}}
# eval_prob 0: any evaluation episode comes from the min_eval_episodes floor.
TINY_ES = {**TINY, "episodes_per_batch": 10, "train_batch_size": 100, "eval_prob": 0.0}
TINY_ARS = {**TINY, "num_rollouts": 8, "rollouts_used": 4, "eval_prob": 0.0}


def _stats(result: dict) -> dict:
    return result["info"]["learner"]["default_policy"]["learner_stats"]


@pytest.mark.parametrize("cls,config", [(ESTrainer, TINY_ES), (ARSTrainer, TINY_ARS)], ids=["ES", "ARS"])
def test_every_iteration_reports_the_current_policys_return(cls, config, tmp_path):
    trainer = cls(dict(config, report_length=2), env="CartPole-v1", logdir=str(tmp_path))
    try:
        per_iteration = []
        for _ in range(4):
            result = trainer.train()
            stats = _stats(result)
            assert stats["eval_episodes"] == 1  # num_workers 0: one, from the first iteration on
            per_iteration.append(stats["eval_return_mean"])
            mean, low, high = (result[f"episode_reward_{k}"] for k in ("mean", "min", "max"))
            assert math.isfinite(mean) and low <= mean <= high, result
            # One window (the last report_length = 2 iterations) for every figure.
            assert result["hist_stats"]["episode_reward"] == per_iteration[-2:]
            assert mean == pytest.approx(np.mean(per_iteration[-2:]))
            assert (low, high) == (min(per_iteration[-2:]), max(per_iteration[-2:]))
            assert result["episode_len_mean"] == pytest.approx(np.mean(result["hist_stats"]["episode_lengths"]))
    finally:
        trainer.stop()


def test_min_eval_episodes_is_a_floor_and_zero_leaves_eval_prob_alone(tmp_path):
    three = ARSTrainer(dict(TINY_ARS, min_eval_episodes=3), env="CartPole-v1", logdir=str(tmp_path / "a"))
    none = ESTrainer(dict(TINY_ES, min_eval_episodes=0), env="CartPole-v1", logdir=str(tmp_path / "b"))
    try:
        result = three.train()
        assert _stats(result)["eval_episodes"] == 3 and len(result["hist_stats"]["episode_reward"]) == 3
        # The evaluation episodes' steps are sampled steps, not trained ones.
        lengths = sum(result["hist_stats"]["episode_lengths"])
        assert result["num_env_steps_sampled"] - result["num_env_steps_trained"] == lengths
        result = none.train()
        assert _stats(result)["eval_episodes"] == 0 and math.isnan(result["episode_reward_mean"])
    finally:
        three.stop()
        none.stop()
    with pytest.raises(ValueError, match="min_eval_episodes"):
        ESTrainer(dict(TINY_ES, min_eval_episodes=-1), env="CartPole-v1", logdir=str(tmp_path / "c"))


def _collection(enough, max_directions=None, min_evals=0, spread=1, per_task=2) -> Collection:
    noise = SharedNoiseTable(make_noise(1000, seed=0))
    return Collection(noise, 10, np.random.default_rng(0), per_task, 0.0, enough, max_directions,
                      min_evals=min_evals, spread=spread)


def test_the_evaluation_floor_is_spread_over_one_round_of_tasks():
    # 5 owed over 2 workers: 3 and 2 in the first two tasks, none after.
    batch = _collection(lambda b: False, max_directions=8, min_evals=5, spread=2)
    assert [batch.next_task().num_evals for _ in range(4)] == [3, 2, 0, 0] and batch.next_task() is None
    # Fewer tasks than workers (one direction): the only task runs them all.
    batch = _collection(lambda b: False, max_directions=1, min_evals=4, spread=4)
    task = batch.next_task()
    assert (len(task.indices), task.num_evals) == (1, 4) and batch.next_task() is None
    # Enough directions before the floor was handed out: one evaluation-only task runs the rest.
    batch = _collection(lambda b: True, min_evals=2, spread=2)
    task = batch.next_task()
    assert (len(task.indices), task.num_evals) == (0, 2) and batch.next_task() is None


def test_the_window_spans_the_last_iterations_and_survives_a_checkpoint():
    window = EvalWindow(2)
    assert math.isnan(window.metrics()["episode_reward_mean"])
    window.add(np.array([500.0]), np.array([500]))
    window.add(np.array([10.0, 20.0]), np.array([10, 20]))
    window.add(np.zeros(0), np.zeros(0))  # an iteration without one: the 500 falls out
    got = window.metrics()
    assert (got["episode_reward_mean"], got["episode_reward_min"], got["episode_reward_max"]) == (15.0, 10.0, 20.0)
    assert got["hist_stats"] == {"episode_reward": [10.0, 20.0], "episode_lengths": [10, 20]}
    restored = EvalWindow(2)
    restored.set_state(window.get_state())
    assert restored.metrics() == got
    restored.add(np.zeros(0), np.zeros(0))
    assert restored.metrics()["hist_stats"]["episode_reward"] == []
    # A checkpoint from before the window: one mean per iteration, lengths unknown.
    old = EvalWindow(2)
    old.set_state({"eval_means": np.array([30.0, 50.0])})
    assert old.metrics()["episode_reward_mean"] == 40.0 and math.isnan(old.metrics()["episode_len_mean"])
