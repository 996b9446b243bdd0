"""The reference's (RLlib 1.x) tuned examples in `tuned_examples/reference_1x/` load through
`rlfleet train -f` unchanged, and the quickest reach their own stop reward within their own
budget (issue 26). benchmarks/reference_1x.py runs them all."""
from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest
import yaml

from rlfleet import cli
from rlfleet.config import validate_config
from rlfleet.registry import get_trainer_class
from tests.helpers import REPO_ROOT

CASES_DIR = REPO_ROOT / "tuned_examples" / "reference_1x"
CASE_FILES = sorted(CASES_DIR.glob("*.yaml"))
# The quickest cases on 2 busy cores (DQN ~20k steps; PPO with 1 remote worker ~40k steps; DQN
# with SoftQ 18-19k steps, ~13 s, on seeds 0, 1, 2).
QUICKEST = ["cartpole-dqn.yaml", "cartpole-ppo.yaml", "cartpole-dqn-softq.yaml"]


def _experiment(path: Path) -> cli.Experiment:
    (experiment,) = cli.load_experiments(cli.build_parser().parse_args(["train", "-f", str(path)]))
    return experiment


def _validated_config(experiment: cli.Experiment) -> dict:
    """The config as `rlfleet train -f` checks it when it builds the trainer (merge, key checks,
    the algorithm's rules across keys), without building workers (APPO's asks for 4)."""
    trainer_cls = get_trainer_class(experiment.run)
    config = trainer_cls.merge_trainer_configs(trainer_cls._default_config, dict(experiment.config,
                                                                                 env=experiment.env))
    validate_config(config, trainer_cls._algo_keys)
    # The rules across keys read only the config: no trainer needs to exist for them.
    trainer_cls.validate_algorithm_config(object.__new__(trainer_cls), config)
    return config


def test_the_reference_files_are_there_in_the_reference_layout():
    assert {p.name for p in CASE_FILES} >= {"cartpole-ppo.yaml", "cartpole-dqn.yaml", "pendulum-ppo.yaml",
                                            "pendulum-sac.yaml", "mountaincarcontinuous-ddpg.yaml",
                                            "frozenlake-appo-vtrace.yaml"}
    for path in CASE_FILES:
        ((name, experiment),) = yaml.safe_load(path.read_text()).items()
        assert name == path.stem and set(experiment) == {"run", "env", "stop", "config"}, path.name
        assert experiment["config"]["framework"] == "tf", f"{path.name}: the reference's own framework key"
        stop = experiment["stop"]
        assert "episode_reward_mean" in stop and ({"timesteps_total", "time_total_s"} & set(stop)), path.name


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.stem)
def test_every_reference_file_passes_the_validation_of_train_f(path):
    experiment = _experiment(path)
    config = _validated_config(experiment)
    assert config["framework"] in ("tf", "torch")


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICKEST)
def test_quickest_reference_cases_reach_their_stop_reward_within_budget(name, tmp_path, request):
    path = CASES_DIR / name
    experiment = _experiment(path)
    if experiment.config.get("num_workers", 0) > 0:  # remote workers: the session's Ray (2 CPUs, loopback)
        request.getfixturevalue("ray_session")
    assert cli.main(["train", "-q", "-f", str(path), "--local-dir", str(tmp_path)]) == cli.EXIT_OK
    (results,) = glob.glob(os.path.join(tmp_path, "*", "result.json"))
    last = json.loads(Path(results).read_text().splitlines()[-1])
    assert last["episode_reward_mean"] >= experiment.stop["episode_reward_mean"], last["episode_reward_mean"]
    assert last["timesteps_total"] <= experiment.stop["timesteps_total"]
