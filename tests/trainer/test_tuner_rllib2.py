"""Ray 2.x's `tune.Tuner` runs rlfleet trials as a 2.x script writes them: a `PPOConfig`
builder (search spaces inside its values) as `param_space`, "PPO" (as 2.x's docs write it),
`config.algo_class` or "rlfleet.PPO" as the trainable, `stop` on RLlib 2.x's result names, and
the best result's Tune `Checkpoint` loaded with `Algorithm.from_checkpoint` and
`restore_from_path`. Budgets are tiny (CartPole, one
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
        "PPO", param_space=config,  # the 2.x line: rlfleet's PPO, since the config is rlfleet's
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
        # 2.x's restore_from_path takes the Tune Checkpoint too, into a trainer built anew.
        fresh.restore_from_path(best.checkpoint)
        assert fresh.iteration == 2
        fresh_weights = fresh.get_policy().get_weights()
        assert all(np.array_equal(trained[k], fresh_weights[k]) for k in trained)
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


def test_the_algorithm_name_given_with_a_builder_is_rlfleets_trainable():
    """`tune.Tuner("PPO", param_space=<rlfleet PPOConfig>)` registers rlfleet's PPO under "PPO"
    before Ray looks the name up, even where RLlib's class holds the name (a stand-in for it
    keeps ray.rllib unimported), so Ray never imports RLlib to find its own."""
    import sys

    from ray import tune
    from ray.tune.registry import TRAINABLE_CLASS, _global_registry, get_trainable_cls

    class FakeRLlibPPO(tune.Trainable):
        __module__ = "ray.rllib.algorithms.ppo.ppo"

        def step(self):
            return {}

    config = tiny_ppo_config(1e-3)
    tune.register_trainable("PPO", FakeRLlibPPO)
    try:
        tune.Tuner("PPO", param_space=config)  # builds no trial: Ray resolves the name at fit()
        found = get_trainable_cls("PPO")
        assert found.__name__ == "rlfleet.PPO" and found._trainer_class.__name__ == "PPOTrainer"
        with pytest.raises(ValueError, match="'DQN' was given with a PPOConfig .*pass 'PPO'"):
            tune.Tuner("DQN", param_space=config)
        assert not _global_registry.contains(TRAINABLE_CLASS, "DQN")
    finally:
        _global_registry.unregister(TRAINABLE_CLASS, "PPO")
    # A trainable of the user's own keeps its name; a call from anywhere else routes nothing.
    tune.register_trainable("FakeRLlibPPO", FakeRLlibPPO)
    try:
        tune.Tuner("FakeRLlibPPO", param_space=config)
        assert get_trainable_cls("FakeRLlibPPO") is FakeRLlibPPO
    finally:
        _global_registry.unregister(TRAINABLE_CLASS, "FakeRLlibPPO")
    assert config.to_dict()["lr"] == 1e-3 and not _global_registry.contains(TRAINABLE_CLASS, "PPO")
    assert not any(name.startswith("ray.rllib") for name in sys.modules)


def test_a_builder_made_before_ray_tune_is_imported_is_linked_on_its_next_call():
    """The builder becomes a Tune config when it is made or changed after `ray.tune` is
    imported; `import rlfleet` and a builder never import Ray themselves (a fresh process)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    code = ("import sys; from rlfleet.algorithms.ppo import PPOConfig; c = PPOConfig().training(lr=1e-3); "
            "assert 'ray' not in sys.modules, 'ray imported'; from ray.tune.tune import _Config; "
            "assert not isinstance(c, _Config); c.environment('CartPole-v1'); assert isinstance(c, _Config); "
            "assert c.lr == 1e-3; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_tune_run_with_the_algorithm_name_and_a_builder_runs_rlfleet(ray_session, tmp_path):
    """`tune.run("PPO", config=PPOConfig()...)` (Ray's older entry point) routes the name too."""
    import sys

    from ray import tune
    from ray.tune.registry import TRAINABLE_CLASS, _global_registry

    try:
        analysis = tune.run("PPO", config=tiny_ppo_config(1e-3), stop={"training_iteration": 1},
                            storage_path=str(tmp_path), verbose=0)
        (trial,) = analysis.trials
        assert trial.status == "TERMINATED" and trial.last_result["training_iteration"] == 1
        assert trial.last_result["env_runners"]["episode_return_mean"] == trial.last_result["episode_reward_mean"]
        assert trial.get_trainable_cls().__name__ == "rlfleet.PPO"
    finally:
        _global_registry.unregister(TRAINABLE_CLASS, "PPO")
    assert not any(name.startswith("ray.rllib") for name in sys.modules)
