"""Ray Tune addresses rlfleet results by RLlib 2.x's names: `stop` on
"env_runners/episode_return_mean" ends a `tune.run` trial (Tune flattens nested result dicts with
"/"), and the best trial is found by that name. A random CartPole policy already reaches the
low threshold, so the first iteration stops the trial; the iteration limit only bounds the test."""
from __future__ import annotations

import pytest

pytest.importorskip("ray.tune")

TINY_PPO = {"env": "CartPole-v1", "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 1,
            "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}, "seed": 0}
METRIC = "env_runners/episode_return_mean"


def test_tune_run_stops_on_a_2x_key(ray_session, tmp_path):
    import rlfleet.tune
    from ray import tune

    rlfleet.tune.register("PPO")
    analysis = tune.run("rlfleet.PPO", config=TINY_PPO, stop={METRIC: 5, "training_iteration": 3},
                        storage_path=str(tmp_path), verbose=0)
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED", trial.error_file
    result = trial.last_result
    assert result["training_iteration"] == 1
    assert result["env_runners"]["episode_return_mean"] == result["episode_reward_mean"] >= 5
    best = analysis.get_best_trial(metric=METRIC, mode="max", scope="last")
    assert best is trial
    assert analysis.dataframe(metric=METRIC, mode="max")[METRIC].iloc[0] == result["episode_reward_mean"]


def test_run_experiments_takes_nested_2x_stop(ray_session, tmp_path):
    import rlfleet.tune

    spec = {"run": "PPO", "config": TINY_PPO, "local_dir": str(tmp_path),
            "stop": {"env_runners": {"episode_return_mean": 5}, "training_iteration": 3}}
    (trial,) = rlfleet.tune.run_experiments({"nested-stop": spec}, verbose=0)
    assert trial.status == "TERMINATED", trial.error_file
    assert trial.last_result["training_iteration"] == 1
