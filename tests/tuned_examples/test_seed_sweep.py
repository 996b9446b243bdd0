"""benchmarks/seeds.py: seeds parsed, files found, runs judged against the file's stop
criteria, and a real sweep through `rlfleet train -f` subprocesses."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks import seeds as sweep
from tests.helpers import REPO_ROOT


def test_parse_seeds_ranges_lists_and_errors():
    assert sweep.parse_seeds(["0..3", "7", "3"]) == [0, 1, 2, 3, 7]
    assert sweep.parse_seeds(["5"]) == [5]
    for bad in ("3..1", "x", "1..y"):
        with pytest.raises(ValueError, match="inclusive ranges like 0..9"):
            sweep.parse_seeds([bad])


def test_files_of_an_algorithm_or_one_file():
    files = sweep.tuned_files("PPO")
    assert REPO_ROOT / "tuned_examples" / "ppo" / "cartpole-ppo.yaml" in files
    one = REPO_ROOT / "tuned_examples" / "ppo" / "cartpole-ppo.yaml"
    assert sweep.tuned_files(str(one)) == [one]
    with pytest.raises(ValueError, match="give a file path or one of"):
        sweep.tuned_files("NOT_AN_ALGO")


def test_stop_criteria_and_judge(tmp_path: Path):
    target_key, target, budgets = sweep.stop_criteria(REPO_ROOT / "tuned_examples" / "ppo" / "cartpole-ppo.yaml")
    assert (target_key, target, budgets) == ("episode_reward_mean", 450.0, {"timesteps_total": 200000.0})
    results = [{"episode_reward_mean": float("nan"), "timesteps_total": 100},
               {"episode_reward_mean": 300.0, "timesteps_total": 1000},
               {"episode_reward_mean": 460.0, "timesteps_total": 2000}]
    assert sweep.judge(results, target_key, target, {"timesteps_total": 5000}) == (True, 460.0, results[2])
    # Reached, but past the budget: a miss.
    assert sweep.judge(results, target_key, target, {"timesteps_total": 1500})[0] is False
    assert sweep.judge(results[:2], target_key, target, budgets) == (False, 300.0, results[1])
    assert sweep.judge([], target_key, target, budgets) == (False, None, None)
    # Nested stop keys ("evaluation/episode_reward_mean").
    nested = [{"evaluation": {"episode_reward_mean": 91.0}, "time_total_s": 10.0}]
    assert sweep.judge(nested, "evaluation/episode_reward_mean", 90.0, {"time_total_s": 600.0})[0] is True
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump({"a": {"run": "PG", "stop": {}}, "b": {"run": "PG", "stop": {}}}))
    with pytest.raises(ValueError, match="exactly one experiment"):
        sweep.stop_criteria(two)
    budget_only = tmp_path / "budget_only.yaml"
    budget_only.write_text(yaml.safe_dump({"a": {"run": "PG", "stop": {"timesteps_total": 10}}}))
    with pytest.raises(ValueError, match="exactly one reward key"):
        sweep.stop_criteria(budget_only)


def test_sweep_runs_the_cli_per_seed(tmp_path: Path, capsys):
    # A random CartPole policy averages ~20: the stop reward 15 is reached in the first
    # iteration; 10000 within one iteration never is.
    spec = {"run": "PG", "env": "CartPole-v1", "config": {"num_workers": 0, "train_batch_size": 400}}
    easy, hard = tmp_path / "easy.yaml", tmp_path / "hard.yaml"
    easy.write_text(yaml.safe_dump({"easy": {**spec, "stop": {"episode_reward_mean": 15, "timesteps_total": 4000}}}))
    hard.write_text(yaml.safe_dump({"hard": {**spec, "stop": {"episode_reward_mean": 10000,
                                                              "training_iteration": 1}}}))
    out = tmp_path / "table.md"
    assert sweep.main([str(easy), "--seeds", "3", "4", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| 3 | 0 | yes |" in text and "| 4 | 0 | yes |" in text
    assert "2/2 reached; median steps 400" in text
    assert sweep.main([str(hard), "--seeds", "0"]) == 1
    assert "| 0 | 0 | no |" in capsys.readouterr().out
