"""Ray 2.x's `tune.Tuner` runs rlfleet trials as a 2.x script writes them: a `PPOConfig`
builder (search spaces inside its values) as `param_space`, `config.algo_class` or
"rlfleet.PPO" as the trainable, `stop` on RLlib 2.x's result names, and the best result's
Tune `Checkpoint` loaded with `Algorithm.from_checkpoint`. Budgets are tiny (CartPole, one
200-step batch an iteration, no remote workers, one trial at a time)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.tune")

METRIC = "env_runners/episode_return_mean"


def tiny_ppo_config(lr):
    from rlfleet.algorithms.ppo import PPOConfig

    return (PPOConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=0, rollout_fragment_length=200)
            .training(lr=lr, train_batch_size=200, minibatch_size=64, num_epochs=1, model={"fcnet_hiddens": [16]})
            .debugging(seed=0))


def greedy_actions(algo, observations):
    return [int(algo.compute_single_action(obs, explore=False)) for obs in observations]


def test_builder_search_spaces_reach_tuner_param_space():
    """Search spaces survive the builder's keyword checks and `to_dict()`, and Tuner takes
    the builder itself (it converts `_Config` instances with `to_dict()`)."""
    from ray import tune
    from ray.tune.tune import _Config

    config = tiny_ppo_config(tune.grid_search([1e-3, 3e-4])).training(gamma=tune.uniform(0.9, 0.99))
    trainable = config.algo_class
    assert issubclass(trainable, tune.Trainable) and trainable.__name__ == "rlfleet.PPO"
    assert isinstance(config, _Config)
    as_dict = config.to_dict()
    assert as_dict["lr"] == {"grid_search": [1e-3, 3e-4]}
    assert isinstance(as_dict["gamma"], tune.search.sample.Float)
    assert as_dict["sgd_minibatch_size"] == 64 and as_dict["num_workers"] == 0


def test_from_checkpoint_takes_a_tune_checkpoint(tmp_path):
    """A Tune `Checkpoint` (or its folder, as a path) around rlfleet's checkpoint_<n>/ loads."""
    from ray import tune

    from rlfleet import Algorithm
    from rlfleet.utils.safe_files import CheckpointError

    algo = tiny_ppo_config(1e-3).build()
    try:
        algo.train()
        algo.save(str(tmp_path / "tune_ckpt"))
        observations = [algo.workers.local_worker().env.observation_space.sample() for _ in range(8)]
        expected = greedy_actions(algo, observations)
    finally:
        algo.stop()
    for checkpoint in (tune.Checkpoint.from_directory(str(tmp_path / "tune_ckpt")), str(tmp_path / "tune_ckpt")):
        restored = Algorithm.from_checkpoint(checkpoint)
        try:
            assert restored.iteration == 1
            assert greedy_actions(restored, observations) == expected
        finally:
            restored.stop()
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="holds no rlfleet checkpoint"):
        Algorithm.from_checkpoint(tune.Checkpoint.from_directory(str(tmp_path / "empty")))


def test_tuner_grid_search_over_a_builder(ray_session, tmp_path):
    from ray import tune

    from rlfleet import Algorithm

    config = tiny_ppo_config(tune.grid_search([1e-3, 3e-4]))
    tuner = tune.Tuner(
        config.algo_class, param_space=config,
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(stop={"training_iteration": 2}, storage_path=str(tmp_path), verbose=0,
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)))
    results = tuner.fit()
    assert results.num_errors == 0, [r.error for r in results]
    assert sorted(r.config["lr"] for r in results) == [3e-4, 1e-3]
    assert all(r.metrics["training_iteration"] == 2 for r in results)
    assert all(r.metrics["env_runners"]["episode_return_mean"] == r.metrics["episode_reward_mean"] for r in results)

    best = results.get_best_result(metric=METRIC, mode="max")
    assert best.metrics["env_runners"]["episode_return_mean"] == max(
        r.metrics["env_runners"]["episode_return_mean"] for r in results)
    assert isinstance(best.checkpoint, tune.Checkpoint)
    algo = Algorithm.from_checkpoint(best.checkpoint)
    fresh = tiny_ppo_config(best.config["lr"]).build()
    try:
        assert algo.iteration == 2 and algo.config["lr"] == best.config["lr"]
        # Restored weights are the trial's trained ones, not the seed's initial ones.
        trained, initial = algo.get_policy().get_weights(), fresh.get_policy().get_weights()
        assert trained.keys() == initial.keys()
        assert any(not np.array_equal(trained[k], initial[k]) for k in trained)
        # The Tune checkpoint's folder as a plain path restores the same policy.
        again = Algorithm.from_checkpoint(best.checkpoint.path)
        try:
            again_weights = again.get_policy().get_weights()
            assert all(np.array_equal(trained[k], again_weights[k]) for k in trained)
        finally:
            again.stop()
    finally:
        algo.stop()
        fresh.stop()


def test_tuner_with_a_2x_dict_stops_on_a_2x_key(ray_session, tmp_path):
    """A plain dict with RLlib 2.x's names under "rlfleet.PPO" (refused before those names
    mapped); a random CartPole policy reaches the low threshold, so iteration 1 stops it."""
    import rlfleet.tune
    from ray import tune

    rlfleet.tune.register("PPO")
    param_space = {"env": "CartPole-v1", "num_env_runners": 0, "rollout_fragment_length": 200,
                   "train_batch_size": 200, "minibatch_size": 64, "num_epochs": 1,
                   "model": {"fcnet_hiddens": [16]}, "seed": 0}
    results = tune.Tuner(
        "rlfleet.PPO", param_space=param_space,
        run_config=tune.RunConfig(stop={METRIC: 5, "training_iteration": 3}, storage_path=str(tmp_path),
                                  verbose=0)).fit()
    assert results.num_errors == 0, [r.error for r in results]
    (result,) = results
    assert result.metrics["training_iteration"] == 1
    assert result.metrics["env_runners"]["episode_return_mean"] >= 5


def test_tuner_refuses_an_rllib_name_with_an_rlfleet_builder():
    """`tune.Tuner("PPO", param_space=<rlfleet PPOConfig>)` would run RLlib's own PPO. A stand-in
    for RLlib's class (its module is all the check reads) keeps ray.rllib unimported."""
    from ray import tune
    from ray.tune.registry import TRAINABLE_CLASS, _global_registry

    class FakeRLlibPPO(tune.Trainable):
        __module__ = "ray.rllib.algorithms.ppo.ppo"

        def step(self):
            return {}

    config = tiny_ppo_config(1e-3)
    assert config.algo_class.__name__ == "rlfleet.PPO"  # makes the builder a Tune param_space
    tune.register_trainable("FakeRLlibPPO", FakeRLlibPPO)
    try:
        with pytest.raises(ValueError, match="RLlib's own algorithm .*config.algo_class.*'rlfleet.FakeRLlibPPO'"):
            tune.Tuner("FakeRLlibPPO", param_space=config)
    finally:
        _global_registry.unregister(TRAINABLE_CLASS, "FakeRLlibPPO")
    assert config.to_dict()["lr"] == 1e-3  # a call from anywhere else is not checked
