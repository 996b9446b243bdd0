"""Off-policy benchmarks: replay throughput, and time to threshold of DQN / SAC / TD3.

    python benchmarks/offpolicy.py replay [--capacity 1000000] [--batch 256]
    python benchmarks/offpolicy.py learning [--algos DQN SAC TD3 DDPG] [--threads 1]

`replay` fills a prioritized buffer with `capacity` CartPole-shaped transitions, then
times `sample(batch)` + `update_priorities` round trips (what one DQN update does) and
uniform sampling; figures are transitions per second. `learning` runs the tuned examples
(tuned_examples/<algo>/*.yaml) until their reward threshold and prints env steps and wall
time to reach it.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np


def replay_throughput(capacity: int, batch: int, rounds: int = 2000) -> None:
    from rlfleet.policy.sample_batch import SampleBatch
    from rlfleet.replay import BATCH_INDEXES, PrioritizedReplayBuffer, ReplayBuffer

    rng = np.random.default_rng(0)
    chunk = 50_000

    def fill(buf):
        start = time.perf_counter()
        for lo in range(0, capacity, chunk):
            n = min(chunk, capacity - lo)
            buf.add(SampleBatch({
                "obs": rng.normal(size=(n, 4)).astype(np.float32),
                "new_obs": rng.normal(size=(n, 4)).astype(np.float32),
                "actions": rng.integers(0, 2, n),
                "rewards": np.ones(n, np.float32),
                "terminateds": np.zeros(n, bool),
                "n_steps": np.ones(n, np.int64),
            }))
        return capacity / (time.perf_counter() - start)

    prio = PrioritizedReplayBuffer(capacity, alpha=0.6, seed=0)
    add_rate = fill(prio)
    prio.update_priorities(np.arange(capacity), rng.uniform(0.01, 10.0, capacity))
    start = time.perf_counter()
    for _ in range(rounds):
        out = prio.sample(batch, beta=0.4)
        prio.update_priorities(out[BATCH_INDEXES], rng.uniform(0.01, 10.0, batch))
    prio_rate = rounds * batch / (time.perf_counter() - start)

    uniform = ReplayBuffer(capacity, seed=0)
    fill(uniform)
    start = time.perf_counter()
    for _ in range(rounds):
        uniform.sample(batch)
    uni_rate = rounds * batch / (time.perf_counter() - start)
    print(f"capacity {capacity:,}, batch {batch}")
    print(f"  add (50k-row fragments, prioritized):        {add_rate:12,.0f} transitions/s")
    print(f"  prioritized sample + update_priorities:      {prio_rate:12,.0f} transitions/s "
          f"({1e6 * batch / prio_rate:.0f} us per batch)")
    print(f"  uniform sample:                              {uni_rate:12,.0f} transitions/s")


def time_to_threshold(algos) -> None:
    import yaml

    from rlfleet.registry import get_trainer_class

    root = os.path.join(os.path.dirname(__file__), "..", "tuned_examples")
    for algo in algos:
        for path in sorted(glob.glob(os.path.join(root, algo.lower(), "*.yaml"))):
            for name, exp in yaml.safe_load(open(path)).items():
                stop = exp["stop"]
                config = dict(exp.get("config") or {}, log_sys_usage=False)
                trainer = get_trainer_class(exp["run"])(env=exp["env"], config=config, logdir=f"/tmp/bench_{name}")
                start = time.perf_counter()
                while True:
                    result = trainer.train()
                    if (result["episode_reward_mean"] >= stop["episode_reward_mean"]
                            or result["timesteps_total"] >= stop["timesteps_total"]):
                        break
                took = time.perf_counter() - start
                trainer.stop()
                reached = result["episode_reward_mean"] >= stop["episode_reward_mean"]
                print(f"{name:16s} {'reached' if reached else 'MISSED '} {stop['episode_reward_mean']:>7} "
                      f"(got {result['episode_reward_mean']:8.1f}) in {result['timesteps_total']:6d} env steps, "
                      f"{took:6.1f} s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rp = sub.add_parser("replay")
    rp.add_argument("--capacity", type=int, default=1_000_000)
    rp.add_argument("--batch", type=int, default=256)
    lp = sub.add_parser("learning")
    lp.add_argument("--algos", nargs="+", default=["DQN", "SAC", "TD3", "DDPG"])
    lp.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (small nets: 1 is fastest, above all on a busy machine)")
    args = parser.parse_args(argv)
    if args.what == "replay":
        replay_throughput(args.capacity, args.batch)
    else:
        import torch

        torch.set_num_threads(args.threads)
        time_to_threshold(args.algos)
    return 0


if __name__ == "__main__":
    sys.exit(main())
