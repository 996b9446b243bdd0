"""DDPG's actor at the action bounds: the reference's MountainCarContinuous file, logged.

    python benchmarks/ddpg_saturation.py --seed 1 --steps 50000
    python benchmarks/ddpg_saturation.py --seed 1 --config '{"fast_path": "off"}'
    python benchmarks/ddpg_saturation.py --seed 1 --done-at-time-limit --config '{"optimizer": {"eps": 1e-7}}'

Trains `tuned_examples/reference_1x/mountaincarcontinuous-ddpg.yaml` (with `--config`
overrides) and prints one JSON line per iteration: the training and evaluation returns, and on
a 19x15 grid of (position, velocity) the actor's pre-squash output x (the action is tanh(x)):
its mean, its largest |x|, the fraction saturated (|tanh(x)| > 0.99), and the critic's dQ/da
at the actor's action (its mean and the fraction > 0) with the mean Q. It stops at the file's
stop reward or `--steps`. `--done-at-time-limit` reports the time limit's end as a terminal
step, as gym 0.x (and so the reference) did. docs/benchmarks.md says what the lines show.
"""
from __future__ import annotations

import argparse
import json
from typing import List, Optional

import gymnasium as gym
import numpy as np
import torch
import yaml

from rlfleet.algorithms.ddpg import DDPGTrainer
from rlfleet.env.registry import register_env

FILE = "tuned_examples/reference_1x/mountaincarcontinuous-ddpg.yaml"


class DoneAtTimeLimit(gym.Wrapper):
    """The TimeLimit's truncation reported as termination (no bootstrap past it)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated or truncated, False, info


def grid_stats(trainer: DDPGTrainer, grid: torch.Tensor) -> dict:
    """The actor's pre-squash outputs and the critic's dQ/da over `grid`."""
    model = trainer.get_policy().model
    with torch.no_grad():
        pre = model.actor(grid).squeeze(-1)
    action = model.act(model.actor, grid).detach().requires_grad_(True)
    q = model.q(model.critic, grid, action)
    (dq_da,) = torch.autograd.grad(q.sum(), action)
    return {"x_mean": round(float(pre.mean()), 3), "x_absmax": round(float(pre.abs().max()), 2),
            "saturated": round(float((pre.abs() > np.arctanh(0.99)).float().mean()), 2),
            "dq_da_mean": round(float(dq_da.mean()), 4), "dq_da_positive": round(float((dq_da > 0).float().mean()), 2),
            "q_mean": round(float(q.detach().mean()), 2)}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=50000, help="env steps at most (default 50000)")
    parser.add_argument("--config", default="{}", help="config overrides as a JSON object")
    parser.add_argument("--done-at-time-limit", action="store_true", help="gym 0.x's episode ends")
    args = parser.parse_args(argv)
    with open(FILE) as f:
        (experiment,) = yaml.safe_load(f).values()
    config = {**experiment["config"], **json.loads(args.config), "seed": args.seed}
    env = experiment["env"]
    if args.done_at_time_limit:
        register_env("MountainCarContinuousDoneAtLimit", lambda ctx: DoneAtTimeLimit(gym.make(experiment["env"])))
        env = "MountainCarContinuousDoneAtLimit"
    trainer = DDPGTrainer(config=config, env=env)
    position, velocity = np.meshgrid(np.linspace(-1.2, 0.6, 19), np.linspace(-0.07, 0.07, 15))
    grid = torch.tensor(np.stack([position.ravel(), velocity.ravel()], 1), dtype=torch.float32)
    target = float(experiment["stop"]["episode_reward_mean"])
    while True:
        result = trainer.train()
        reward = result["episode_reward_mean"]
        print(json.dumps({"steps": result["timesteps_total"], "reward": reward,
                          "eval": result.get("evaluation", {}).get("episode_reward_mean"),
                          **grid_stats(trainer, grid)}), flush=True)
        if result["timesteps_total"] >= args.steps or (reward == reward and reward >= target):
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
