"""Seeded learning regressions: every experiment in `tuned_examples/**/*.yaml` must reach its
reward target within its timestep budget.

The YAML files are the only source of the hyperparameters: they are read through the CLI's
own loader (`rlfleet train -f`), so a new file is tested without a test edit and a test cannot
drift from its file. Each run is seeded by the file's `config.seed`, with one torch thread
(conftest.py), so it is deterministic on a given machine.

A few examples take minutes to their targets; `LONG_EXAMPLES` keeps them out of `make test`
(whose whole suite must stay under 20 minutes) while a quicker example of the same algorithm
stays in. `RLFLEET_LONG_EXAMPLES=1 pytest tests/tuned_examples/test_learning.py -m slow` runs them too.
"""
from __future__ import annotations

import math
import os
import time
from typing import Dict, Tuple

import pytest

from rlfleet.registry import get_trainer_class, list_algorithms
from tests.helpers import TUNED_EXAMPLES_DIR, TunedExample, all_tuned_examples, train_until

TUNED_EXAMPLES = all_tuned_examples()

# CI's env-step budget per example, where it is smaller than the file's own
# `stop.timesteps_total`: (steps, why). Only the budget may differ from the file, never a
# hyperparameter. Every example reaches its target well within its file's budget; a cut here
# only makes a regression fail sooner.
_PENDULUM_WHY = ("reaches -250 in 6-7k steps (one update per env step, ~5-8 ms each on 2 busy "
                 "cores); 30k steps could pass pytest's 300 s timeout, so a regression would "
                 "fail as a timeout instead of with its reward history")
CI_TIMESTEP_BUDGETS: Dict[str, Tuple[int, str]] = {
    "ddpg/pendulum-ddpg.yaml": (15000, _PENDULUM_WHY),
    "sac/pendulum-sac.yaml": (15000, _PENDULUM_WHY),
    "sac/pendulum-sac-re3.yaml": (15000, _PENDULUM_WHY),
    "td3/pendulum-td3.yaml": (15000, _PENDULUM_WHY),
    "apex/pendulum-apex-ddpg.yaml": (15000, _PENDULUM_WHY),
    "dqn/cartpole-dqn-zoo.yaml": (30000, "seeds 0, 1, 2 reach 150 at 24.6k, 11.3k, 10.2k steps on this "
                                  "machine (128 updates per 256 steps; seed 0 peaks at 103 near 9k, then dips: "
                                  "a run's path differs between CPUs, e.g. 8k on the previous one); the Zoo's "
                                  "50k steps (greedy 500 on 3 seeds) run in benchmarks/zoo.py"),
    "a2c/cartpole-a2c-zoo.yaml": (40000, "reaches 150 at ~14k steps (seed 0; 350 updates of 40 steps, a few s of "
                                  "CPU); the Zoo's 500k steps (greedy 500) run in benchmarks/zoo.py"),
    "ppo/cartpole-ppo-zoo.yaml": (30000, "reaches 150 at ~9k steps (seed 0; 20 epochs per 256 steps, a few s of "
                                  "CPU); the Zoo's 100k steps (greedy 500) run in benchmarks/zoo.py"),
    "r2d2/stateless-cartpole-r2d2.yaml": (100000, "seeds 0, 1, 2 reach 150 at 59.8k, 55.4k, 68.8k steps (~200-300 s "
                                          "of CPU each); the reference's 1M would run for an hour before failing"),
    "rnnsac/stateless-pendulum-rnnsac.yaml": (40000, "seeds 0, 1, 2 reach -300 at 14k, 20k, 25k steps (one update of "
                                              "16 sequences per 2 steps, 6-8 min each on 2 busy cores)"),
    "apex/cartpole-apex.yaml": (60000, "2 remote workers: reaches 150 in 22-28k steps (3 seeds), ~40 s on 2 "
                                "busy cores; 100k steps could pass pytest's timeout instead of failing with its "
                                "reward history"),
}


# Examples `make test` leaves to `RLFLEET_LONG_EXAMPLES=1` runs: {test id: why, and which quicker
# example of the algorithm CI runs instead}.
LONG_EXAMPLES: Dict[str, str] = {
    "r2d2/stateless-cartpole-r2d2.yaml": "~60k env steps to 150 (75 s of CI); r2d2/repeat-first-obs-r2d2.yaml and "
                                         "r2d2/repeat-first-obs-apex-r2d2.yaml show R2D2 learning a memory task",
    "maddpg/simple-spread-maddpg.yaml": "mpe2 (~15k steps, 21 s of CI); maddpg/match-target-maddpg.yaml and "
                                        "tests/algorithms/test_maddpg.py's learning test stay",
    "maddpg/speaker-listener-maddpg.yaml": "mpe2 (~13k steps); maddpg/match-target-maddpg.yaml stays",
    "qmix/simple-spread-vdn.yaml": "mpe2 (~7.5k steps of episodes); qmix/two-step-qmix.yaml stays",
    "rnnsac/stateless-pendulum-rnnsac.yaml": "~14k env steps to -300 (110 s of CI); rnnsac/repeat-first-obs-rnnsac.yaml "
                                             "shows RNNSAC learning a memory task",
    "qmix/simple-spread-qmix.yaml": "mpe2 (~25k steps of episodes); qmix/two-step-qmix.yaml stays",
    "maddpg/simple-spread-maddpg-long.yaml": "mpe2 (~35k steps, 3 min); maddpg/match-target-maddpg.yaml stays",
    "qmix/simple-spread-vdn-long.yaml": "mpe2 (~55k steps of episodes, ~70 s); qmix/two-step-qmix.yaml stays",
    "ppo/pong-ppo-envpool.yaml": "Atari Pong to 18: millions of frames, hours of CPU (benchmarks/atari.py runs "
                                 "it); ppo/cartpole-ppo.yaml stays",
    "impala/pong-impala-envpool.yaml": "Atari Pong to 18: hours of CPU (benchmarks/atari.py --algo IMPALA); "
                                       "impala/cartpole-impala.yaml stays",
    "appo/pong-appo-envpool.yaml": "Atari Pong to 18: hours of CPU (benchmarks/atari.py --algo APPO); "
                                   "appo/cartpole-appo.yaml stays",
    "crr/pendulum-crr.yaml": "~15-25k updates of 512 rows to -300 (minutes of CPU, could pass pytest's timeout); "
                             "crr/cartpole-crr.yaml stays",
    "iql/pendulum-iql.yaml": "~20-30k updates of 512 rows to -300 (minutes of CPU); iql/cartpole-iql.yaml stays",
    "mbmpo/pendulum-mbmpo.yaml": "-300 within 20k real steps: seed 0 at 8k, ~9 min on 2 busy cores "
                                 "(docs/benchmarks.md); mbmpo/pendulum-mbmpo-ci.yaml stays",
    "dreamerv3/cartpole-dreamerv3-quick.yaml": "nano size, 40 within 4k steps: ~10 min on 2 busy cores; see ONLY_LONG",
    "dreamerv3/cartpole-dreamerv3.yaml": "XS at training_ratio 512: seconds per update on CPU, hours to 100k steps "
                                         "(benchmarks/dreamerv3.py learn); see ONLY_LONG",
    "dreamerv3/pendulum-dreamerv3.yaml": "XS at training_ratio 512: hours to 50k steps (benchmarks/dreamerv3.py "
                                         "learn); see ONLY_LONG",
}
RUN_LONG_EXAMPLES = os.environ.get("RLFLEET_LONG_EXAMPLES") == "1"
LEARNING_EXAMPLES = [example for example in TUNED_EXAMPLES
                     if RUN_LONG_EXAMPLES or example.test_id not in LONG_EXAMPLES]


# Algorithms whose every tuned example is long: {name: the CI test that guards its learning}.
ONLY_LONG: Dict[str, str] = {
    "DreamerV3": "no example learns within CI's minutes on 2 CPU cores (even the nano size takes ~25 min to 125 "
                 "on CartPole); tests/algorithms/test_dreamerv3.py checks that the world-model loss falls and "
                 "imagined returns stay finite",
}


def test_long_examples_name_existing_examples_and_leave_each_algorithm_one_in_ci():
    by_id = {example.test_id: example for example in TUNED_EXAMPLES}
    for test_id, why in LONG_EXAMPLES.items():
        assert test_id in by_id and why, f"LONG_EXAMPLES names {test_id!r}, which is no tuned example"
        assert by_id[test_id].run in ONLY_LONG or any(
            e.run == by_id[test_id].run for e in TUNED_EXAMPLES if e.test_id not in LONG_EXAMPLES), test_id
    for algo in ONLY_LONG:
        assert all(e.test_id in LONG_EXAMPLES for e in TUNED_EXAMPLES if e.run == algo), (
            f"{algo} has an example CI runs: drop it from ONLY_LONG")


# Registered algorithms without a tuned example of their own: {name: why its learning is still
# guarded}. Every other registered algorithm must have one, so a new algorithm needs a file.
WITHOUT_TUNED_EXAMPLE: Dict[str, str] = {
    "Dreamer": "an alias that trains DreamerV3 (the same trainer class, one logged note): dreamerv3/*.yaml",
    "SimpleQ": "DQN with dueling, double Q, n-step and prioritized replay off: dqn/cartpole-dqn-zoo.yaml "
               "learns with exactly those settings",
}


def test_every_registered_algorithm_has_a_tuned_example():
    # Guards the glob: an empty or moved folder would otherwise make the learning test vanish.
    covered = {example.run for example in TUNED_EXAMPLES}
    registered = set(list_algorithms())
    missing = registered - covered - set(WITHOUT_TUNED_EXAMPLE)
    assert not missing, f"no tuned example in tuned_examples/ runs {sorted(missing)}"
    stale = set(WITHOUT_TUNED_EXAMPLE) - (registered - covered)
    assert not stale, f"WITHOUT_TUNED_EXAMPLE names {sorted(stale)}, which is unregistered or has an example"


def test_every_tuned_examples_folder_gives_examples():
    # A folder whose files stop loading as experiments (renamed to .yml, emptied) would drop out silently.
    folders = {path.parent.name for path in TUNED_EXAMPLES_DIR.glob("*/*.y*ml")} - {"reference_1x"}
    assert folders == {example.relpath.split("/")[0] for example in TUNED_EXAMPLES}


@pytest.mark.parametrize("example", TUNED_EXAMPLES, ids=lambda e: e.test_id)
def test_tuned_example_is_a_seeded_reward_regression(example: TunedExample):
    # Without these the learning test below would be meaningless or nondeterministic.
    assert example.run in list_algorithms(), example.run
    assert isinstance(example.config.get("seed"), int), f"{example.test_id}: set config.seed"
    assert set(example.stop) == {"episode_reward_mean", "timesteps_total"}, (
        f"{example.test_id}: stop must hold the reward target `episode_reward_mean` and the "
        f"budget `timesteps_total`, got {example.stop}")


def test_ci_budgets_name_existing_examples_and_only_cut_their_budget():
    by_id = {example.test_id: example for example in TUNED_EXAMPLES}
    for test_id, (steps, why) in CI_TIMESTEP_BUDGETS.items():
        assert test_id in by_id, f"CI_TIMESTEP_BUDGETS names {test_id!r}, which is no tuned example"
        assert 0 < steps < by_id[test_id].stop["timesteps_total"] and why, test_id


@pytest.mark.slow
@pytest.mark.parametrize("example", LEARNING_EXAMPLES, ids=lambda e: e.test_id)
def test_tuned_example_reaches_its_reward_target(example: TunedExample, tmp_path, request):
    if example.config.get("num_workers", 0) > 0:  # remote workers: the session's Ray (2 CPUs, loopback)
        request.getfixturevalue("ray_session")
    target = example.stop["episode_reward_mean"]
    budget = CI_TIMESTEP_BUDGETS.get(example.test_id, (example.stop["timesteps_total"],))[0]
    trainer = get_trainer_class(example.run)(config=example.config, env=example.env, logdir=str(tmp_path))
    start = time.perf_counter()
    try:
        result, history = train_until(trainer, reward=target, max_timesteps=budget)
    finally:
        trainer.stop()
    reward, steps = result["episode_reward_mean"], result["timesteps_total"]
    print(f"\n{example.test_id}: {reward:.1f} after {steps} env steps, {len(history)} iterations, "
          f"{time.perf_counter() - start:.1f} s")
    assert math.isfinite(reward) and reward >= target, (
        f"{example.run} on {example.env} reached only {reward:.1f} (target {target}) in {steps} env "
        f"steps (budget {budget}); last iterations (steps, reward): {history[-5:]}")


# The first-iteration check below takes ~150 s for every example (Ray's start-up for those with
# remote workers, ES/ARS's 10k-step iterations); `make test-fast` runs it for these, each under
# 2 s on 2 busy cores (~13 s together): the in-process examples of the bandits, whose learning
# takes a few hundred steps and so shows only with short iterations, and of PPO, DQN, SAC & co.
FIRST_ITERATION_FAST = frozenset({
    "bandits/linear-lints.yaml", "bandits/linear-linucb.yaml", "bandits/wheel-lints.yaml",
    "bandits/wheel-linucb.yaml", "ppo/cartpole-ppo.yaml", "ppo/cartpole-ppo-zoo.yaml",
    "ppo/cartpole-ppo-external.yaml", "ppo/cartpole-ppo-fake-gpus.yaml", "ppo/frozenlake-curiosity.yaml",
    "ppo/stateless-cartpole-lstm-ppo.yaml", "pg/cartpole-pg.yaml", "bc/cartpole-bc.yaml",
    "marwil/cartpole-marwil.yaml", "qmix/two-step-qmix.yaml", "maddpg/match-target-maddpg.yaml",
    "dqn/cartpole-dqn.yaml", "dqn/cartpole-dqn-zoo.yaml", "ddpg/pendulum-ddpg.yaml", "td3/pendulum-td3.yaml",
    "sac/pendulum-sac.yaml", "r2d2/repeat-first-obs-r2d2.yaml",
})


def test_first_iteration_fast_set_names_existing_examples():
    assert FIRST_ITERATION_FAST <= {example.test_id for example in LEARNING_EXAMPLES}


def _first_iteration_cases():
    return [pytest.param(example, id=example.test_id,
                         marks=() if example.test_id in FIRST_ITERATION_FAST else pytest.mark.slow)
            for example in LEARNING_EXAMPLES]


@pytest.mark.parametrize("example", _first_iteration_cases())
def test_tuned_example_first_iteration_stays_below_its_stop_reward(example: TunedExample, tmp_path, request):
    # An example whose first iteration already meets its stop reward shows no learning.
    if example.config.get("num_workers", 0) > 0:
        request.getfixturevalue("ray_session")
    target = example.stop["episode_reward_mean"]
    trainer = get_trainer_class(example.run)(config=example.config, env=example.env, logdir=str(tmp_path))
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    reward = result["episode_reward_mean"]  # NaN (no episode finished yet) is below any target
    assert not reward >= target, (
        f"{example.test_id}: the first iteration ({result['timesteps_total']} env steps) already reaches "
        f"{reward:.2f} >= its stop reward {target}; shorten its iterations (timesteps_per_iteration) or raise the "
        "target so that the run shows learning")
