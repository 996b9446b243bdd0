"""Overlap of sampling and learning on the batched path: PPO on Gymnasium's batched CartPole
(`tuned_examples/ppo/cartpole-ppo-vector.yaml`'s settings) with `sample_async: False` (sample,
then learn) against `sample_async: True` (a sampler thread steps the envs while the learner
updates; NumPy and torch release the GIL in their kernels), alternating timed runs of
`--iters` iterations in one process; prints env steps/s of training and the ratio.

    python benchmarks/overlap.py [--iters 20] [--rounds 3] [--envs 64]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def trainer(sample_async: bool, envs: int):
    import yaml

    from rlfleet.algorithms.ppo import PPOTrainer

    (spec,) = yaml.safe_load((ROOT / "tuned_examples/ppo/cartpole-ppo-vector.yaml").read_text()).values()
    config = dict(spec["config"], env=spec["env"], sample_async=sample_async, num_envs_per_worker=envs,
                  train_batch_size=32 * envs)
    return PPOTrainer(config=config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=64)
    args = parser.parse_args()
    trainers = {"sample, then learn": trainer(False, args.envs), "sample_async": trainer(True, args.envs)}
    for t in trainers.values():
        t.train()  # warm-up
    rates = {name: [] for name in trainers}
    for _ in range(args.rounds):
        for name, t in trainers.items():
            start, steps = time.perf_counter(), 0
            for _ in range(args.iters):
                steps += t.train()["timesteps_this_iter"]
            rates[name].append(steps / (time.perf_counter() - start))
    for t in trainers.values():
        t.stop()
    print(f"PPO, CartPole-v1 make_vec, {args.envs} envs; {args.rounds} alternating rounds of {args.iters} iterations; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, values in rates.items():
        print(f"{name:>20}: {statistics.median(values):>9,.0f} env steps/s ({min(values):,.0f}-{max(values):,.0f})")
    ratios = [a / b for a, b in zip(rates["sample_async"], rates["sample, then learn"])]
    print(f"{'async / sync':>20}: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
