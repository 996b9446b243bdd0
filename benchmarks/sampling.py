"""Sampling throughput: `RolloutWorker.sample()` vs a plain Gymnasium loop (the ceiling).

Both step the same CartPole-v1 envs in this one run; the figure that matters is the
ratio (ours / ceiling), which does not depend on how fast this machine is.

    python benchmarks/sampling.py [--steps 40000] [--envs 1 8]
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np


def plain_gym_loop(num_envs: int, total_steps: int, seed: int = 0) -> float:
    """Env steps/s of a bare loop: random actions, manual reset, nothing stored."""
    envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
        env.action_space.seed(seed + i)
    rng = np.random.default_rng(seed)
    steps = 0
    start = time.perf_counter()
    while steps < total_steps:
        actions = rng.integers(0, 2, size=num_envs)
        for env, a in zip(envs, actions):
            _, _, term, trunc, _ = env.step(int(a))
            if term or trunc:
                env.reset()
        steps += num_envs
    return steps / (time.perf_counter() - start)


def rlfleet_sampler(num_envs: int, total_steps: int, seed: int = 0) -> float:
    """Env steps/s of `RolloutWorker.sample()` with the default PPO model."""
    from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
    from rlfleet.config import merge_configs, validate_config
    from rlfleet.env.registry import resolve_env
    from rlfleet.rollout.rollout_worker import RolloutWorker

    config = merge_configs(DEFAULT_CONFIG, {"env": "CartPole-v1", "num_envs_per_worker": num_envs,
                                            "rollout_fragment_length": 200, "seed": seed})
    validate_config(config)
    _, creator = resolve_env("CartPole-v1")
    worker = RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config)
    worker.sample()  # warm-up: first reset, buffer allocation
    steps = 0
    start = time.perf_counter()
    while steps < total_steps:
        steps += worker.sample().count
    rate = steps / (time.perf_counter() - start)
    worker.stop()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40000)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    print(f"{'envs/worker':>11} | {'plain gym steps/s':>17} | {'rlfleet steps/s':>15} | ratio")
    for n in args.envs:
        ceiling = plain_gym_loop(n, args.steps)
        ours = rlfleet_sampler(n, args.steps)
        print(f"{n:>11} | {ceiling:>17,.0f} | {ours:>15,.0f} | {ours / ceiling:.3f}")


if __name__ == "__main__":
    main()
