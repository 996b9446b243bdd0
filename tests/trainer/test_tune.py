"""rlfleet.tune: rlfleet trainers as Ray Tune trials, on a real local Ray (loopback only).

One grid search (2 lr values, run one after the other in one reused actor), then a new
trial with 2 remote workers restored from one of its checkpoints: together they show
results, TensorBoard files, actor reuse (`reset_config`), checkpoints in rlfleet's format
inside Tune's folders, and the remote workers inside the trial's placement group.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray.tune")

TINY_PPO = {"env": "CartPole-v1", "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
            "rollout_fragment_length": 100, "model": {"fcnet_hiddens": [16]}, "seed": 0}


def test_import_rlfleet_tune_does_not_import_ray():
    code = "import rlfleet.tune, sys; print('ray' in sys.modules, 'ray.tune' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_default_resource_request_is_the_trainers_placement_group():
    import rlfleet.tune

    cls = rlfleet.tune.trainable("PPO")
    assert cls.__name__ == "rlfleet.PPO"
    pgf = cls.default_resource_request({"num_workers": 2, "num_cpus_per_worker": 0.5,
                                        "placement_strategy": "SPREAD", "custom_resources_per_worker": {"x": 1}})
    assert pgf.bundles == [{"CPU": 1}] + [{"CPU": 0.5, "x": 1}] * 2  # Tune leaves zero amounts out
    assert pgf.strategy == "SPREAD"
    with pytest.raises(ValueError, match="Unknown algorithm 'NOPE'"):
        rlfleet.tune.trainable("NOPE")


def _placement_callbacks():
    """Callbacks (a local class: Tune ships it to the trial by value) that put the trial's
    placement group, as Ray reports it, into each result."""
    from rlfleet.callbacks import DefaultCallbacks

    class PlacementProbe(DefaultCallbacks):
        def on_train_result(self, *, trainer, result, **kwargs):
            import ray
            from ray.util import get_current_placement_group, placement_group_table

            pg = get_current_placement_group()
            table = placement_group_table(pg)
            result["placement"] = {
                "trial": ray.get_runtime_context().get_placement_group_id(),
                "workers": trainer.workers.foreach_worker(
                    lambda w: __import__("ray").get_runtime_context().get_placement_group_id()),
                "strategy": table["strategy"],
                "bundles": [table["bundles"][i] for i in sorted(table["bundles"])],
            }

    return PlacementProbe


def test_grid_search_then_restore_into_a_placed_trial(ray_session, tmp_path):
    import rlfleet.tune
    from ray import tune

    from rlfleet.trainer import Trainer

    assert "rlfleet.PPO" in rlfleet.tune.register("PPO", "PG")
    tuner = tune.Tuner("rlfleet.PPO", param_space=dict(TINY_PPO, lr=tune.grid_search([1e-3, 3e-4])),
                       tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=1),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), stop={"training_iteration": 2},
                                                 checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
                                                 verbose=0))
    grid = sorted(tuner.fit(), key=lambda r: r.config["lr"])
    assert [r.config["lr"] for r in grid] == [3e-4, 1e-3]
    for trial in grid:
        assert trial.error is None
        assert trial.metrics["training_iteration"] == 2
        assert trial.metrics["timesteps_total"] == 400
        assert trial.path.startswith(str(tmp_path))
        assert glob.glob(os.path.join(trial.path, "events.out.tfevents.*"))
        lines = open(os.path.join(trial.path, "result.json")).read().splitlines()
        assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2]
    # The second trial ran in the first one's actor (reset_config), with its own lr.
    assert grid[0].metrics["pid"] == grid[1].metrics["pid"]
    assert [r.metrics["info"]["learner"]["default_policy"]["learner_stats"]["cur_lr"] for r in grid] == [3e-4, 1e-3]

    # Tune's checkpoint folder holds an rlfleet checkpoint (JSON + safetensors, no pickle).
    ck_dir = grid[0].checkpoint.path
    (inner,) = glob.glob(os.path.join(ck_dir, "checkpoint_*", "manifest.json"))
    assert not glob.glob(os.path.join(ck_dir, "**", "*.pkl"), recursive=True)
    rebuilt = Trainer.from_checkpoint(os.path.dirname(inner), {"num_workers": 0}, logdir=str(tmp_path / "rebuilt"))
    assert rebuilt.iteration == 2
    rebuilt.stop()

    # A new trial restored from it, with 2 remote workers placed in its placement group.
    config = dict(TINY_PPO, lr=grid[0].config["lr"], num_workers=2, num_cpus_per_worker=0.5,
                  placement_strategy="SPREAD", callbacks=_placement_callbacks())
    run = tune.run("rlfleet.PPO", config=config, stop={"training_iteration": 3}, storage_path=str(tmp_path),
                   restore=ck_dir, verbose=0)
    (trial,) = run.trials
    result = trial.last_result
    assert trial.status == "TERMINATED", trial.error_file
    assert result["training_iteration"] == 3 and result["timesteps_total"] == 600
    assert result["num_healthy_workers"] == 2
    placement = result["placement"]
    assert placement["trial"] is not None
    assert placement["workers"] == [placement["trial"]] * 3  # the local worker, then both remote ones
    assert placement["strategy"] == "SPREAD"
    assert [b.get("CPU") for b in placement["bundles"]] == [1.0, 0.5, 0.5]


GRID_YAML = """
cartpole-grid:
  run: PPO
  env: CartPole-v1
  stop: {training_iteration: 1}
  num_samples: 1
  config:
    lr: {grid_search: [0.001, 0.0003]}
    seed: {choice: [3]}
    train_batch_size: 200
    sgd_minibatch_size: 64
    num_sgd_iter: 1
    rollout_fragment_length: 100
    model: {fcnet_hiddens: [16]}
"""


def test_cli_runs_a_grid_search_yaml_through_tune(ray_session, tmp_path, capsys):
    from rlfleet import cli

    path = tmp_path / "grid.yaml"
    path.write_text(GRID_YAML)
    assert cli.main(["train", "-f", str(path), "--local-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"Results: {tmp_path / 'out' / 'cartpole-grid'}"
    trial_dirs = sorted(glob.glob(str(tmp_path / "out" / "cartpole-grid" / "rlfleet.PPO_*")))
    assert len(trial_dirs) == 2
    lrs = set()
    for folder in trial_dirs:
        (line,) = open(os.path.join(folder, "result.json")).read().splitlines()
        result = json.loads(line)
        assert result["training_iteration"] == 1 and result["config"]["seed"] == 3
        lrs.add(result["config"]["lr"])
        assert glob.glob(os.path.join(folder, "events.out.tfevents.*"))
    assert lrs == {0.001, 0.0003}
    assert sum("TERMINATED" in line for line in out) >= 2


@pytest.mark.parametrize("extra", ["  config: {lr: {grid_search: [0.1, 0.01]}}\n", "  num_samples: 3\n"])
def test_cli_without_tune_names_the_extra(monkeypatch, tmp_path, capsys, extra):
    from rlfleet import cli

    monkeypatch.setitem(sys.modules, "ray.tune", None)  # as if ray[tune] were not installed
    path = tmp_path / "grid.yaml"
    path.write_text("x:\n  run: PPO\n  env: CartPole-v1\n" + extra)
    assert cli.main(["train", "-f", str(path), "--local-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'rlfleet[tune]'" in err
    assert ("'lr'" in err) if "grid" in extra else ("num_samples is 3" in err)
    assert not (tmp_path / "out").exists()


def test_yaml_search_spaces_become_tune_domains():
    from ray import tune

    from rlfleet.tune import find_search_space, resolve_search_spaces

    config = {"lr": {"uniform": [0.1, 0.2]}, "model": {"fcnet_hiddens": {"choice": [[8], [16]]}},
              "gamma": {"grid_search": [0.9, 0.99]}, "env_config": {"a": 1}}
    assert find_search_space(config) == "lr"
    assert find_search_space({"model": {"x": {"randint": [0, 3]}}}) == "model/x"
    assert find_search_space({"env_config": {"a": {"b": 1}}}) is None
    out = resolve_search_spaces(config)
    assert isinstance(out["lr"], tune.search.sample.Float) and out["lr"].lower == 0.1
    assert out["model"]["fcnet_hiddens"].categories == [[8], [16]]
    assert out["gamma"] == {"grid_search": [0.9, 0.99]} and out["env_config"] == {"a": 1}
    with pytest.raises(ValueError, match="'model/x'.*list of arguments"):
        resolve_search_spaces({"model": {"x": {"uniform": 3}}})
