"""PPO + Curiosity against plain PPO on a MiniGrid task with partial observations (issue 31):
the file's experiment, and the same without `exploration_config`, on each seed, each trained
for the same env-step budget, then scored greedily.

    python benchmarks/minigrid_curiosity.py [--file benchmarks/minigrid_curiosity.yaml]
        [--seeds 0 1 2] [--timesteps N] [--episodes 20] [--arms curiosity plain]
        [--set '{"env_config": {"max_steps": 20, "num_actions": 3}}']

`--set` overrides config keys for both arms (a dict value updates the file's dict, e.g. one
`env_config` or `exploration_config` key). The file's header gives both arms' figures (issue
31's must-show) and those of the settings tried before it.

Each run trains until the file's `stop.episode_reward_mean` (the sampled, extrinsic mean return)
or its budget (`--timesteps`, default the file's `stop.timesteps_total`), then plays `--episodes` episodes with
`explore=False` on fresh envs; a success is an episode that reaches the goal (a positive
return). Prints one line per run and a summary per arm. One torch thread.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402  (benchmarks/zoo.py: the greedy scoring)

DEFAULT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minigrid_curiosity.yaml")


def arm_config(file_config: dict, arm: str, seed: int, overrides: dict) -> dict:
    """The config one arm trains with: the file's, with `seed` and `overrides` (a dict value
    updates the file's dict), and for arm "plain" without `exploration_config`, so that the
    two arms differ in nothing else."""
    config = {**file_config, "seed": seed, "log_sys_usage": False}
    for key, value in overrides.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and isinstance(config.get(key), dict) \
            else value
    if arm == "plain":
        config.pop("exploration_config", None)
    return config


def run(path: str, arm: str, seed: int, timesteps: Optional[int], episodes: int, overrides: dict) -> dict:
    """Trains the file's experiment (arm "curiosity") or the same without its exploration_config
    (arm "plain") with `seed`, then scores it greedily."""
    import yaml

    from rlfleet.registry import get_trainer_class

    with open(path) as f:
        (exp,) = yaml.safe_load(f).values()
    budget = int(timesteps or exp["stop"]["timesteps_total"])
    target = exp["stop"]["episode_reward_mean"]
    config = arm_config(exp["config"], arm, seed, overrides)
    trainer = get_trainer_class(exp["run"])(env=exp["env"], config=config,
                                            logdir=tempfile.mkdtemp(prefix=f"minigrid_{arm}_{seed}_"))
    start = time.perf_counter()
    history = []
    try:
        result = {"timesteps_total": 0}
        # The file's stop rule for both arms: its reward target or its budget, whichever comes first.
        while result["timesteps_total"] < budget and not (history and history[-1][1] >= target):
            result = trainer.train()
            stats = result["info"]["learner"]["default_policy"]["learner_stats"]
            history.append((result["timesteps_total"], result["episode_reward_mean"],
                            round(stats.get("intrinsic_reward_mean", 0.0), 4)))
        wall = time.perf_counter() - start
        returns = zoo.greedy_score(trainer, exp["env"], episodes, config.get("env_config"))
    finally:
        trainer.stop()
    # The first step at which the (sampled, extrinsic) mean return passed the file's target.
    reached = next((steps for steps, mean, _ in history if mean >= target), None)
    return {"arm": arm, "seed": seed, "steps": result["timesteps_total"], "wall_s": round(wall),
            "success": sum(r > 0 for r in returns) / len(returns), "greedy_mean": sum(returns) / len(returns),
            "reached_target_at": reached,
            "history": [(steps, round(mean, 3), intrinsic)
                        for steps, mean, intrinsic in history[:: max(1, len(history) // 12)]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=DEFAULT_FILE)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timesteps", type=int, default=None)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--arms", nargs="+", default=["curiosity", "plain"], choices=["curiosity", "plain"])
    parser.add_argument("--set", default="{}", help="JSON config overrides for both arms")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = json.loads(args.set)
    for arm in args.arms:
        rows = []
        for seed in args.seeds:
            rows.append(run(args.file, arm, seed, args.timesteps, args.episodes, overrides))
            print(json.dumps(rows[-1]), flush=True)
        print(f"{arm}: greedy success {[r['success'] for r in rows]} after {[r['steps'] for r in rows]} steps",
              flush=True)


if __name__ == "__main__":
    main()
