"""Multi-process env stepping without Ray: `gym_env_vectorize_mode: "async"` (Gymnasium's
AsyncVectorEnv, one process per sub-env, shared memory) against the one-process settings and
`num_workers: 2` Ray workers, on a Python env whose step costs real CPU time.

The env is CartPole-v1 plus `--step-us` microseconds of busy work per step (a Python physics
step; 0: plain CartPole, where the processes' hand-offs cost more than the step). Every setting
samples the same total number of envs (`--envs`) with PPO's policy through the worker set, as
training does; the figure is each setting's env steps/s over the one-process default's in the
same round (rounds interleaved, median and min-max).

    python benchmarks/async_envs.py [--envs 8] [--step-us 200] [--steps 8000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium as gym

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


class BusyStep(gym.Wrapper):
    """CartPole with `step_us` microseconds of CPU work per step."""

    def __init__(self, env: gym.Env, step_us: float):
        super().__init__(env)
        self.seconds = step_us / 1e6

    def step(self, action):
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass
        return self.env.step(action)


def make_busy_cartpole(env_context):
    return BusyStep(gym.make("CartPole-v1"), float(env_context.get("step_us", 0)))


def worker_set(settings: dict, step_us: float):
    from rlfleet.algorithms.common.sampling import synchronous_parallel_sample
    from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
    from rlfleet.config import merge_configs, validate_config
    from rlfleet.rollout.worker_set import WorkerSet

    config = merge_configs(DEFAULT_CONFIG, {"env": "busy_cartpole", "env_config": {"step_us": step_us},
                                            "rollout_fragment_length": 100, "seed": 0,
                                            "model": {"fcnet_hiddens": [64, 64]}, **settings})
    validate_config(config)
    workers = WorkerSet(env_creator=make_busy_cartpole, policy_class=PPOTorchPolicy, trainer_config=config,
                        num_workers=config["num_workers"])
    synchronous_parallel_sample(workers, 1)  # warm-up
    return workers


def rate(workers, steps: int) -> float:
    from rlfleet.algorithms.common.sampling import synchronous_parallel_sample

    start = time.perf_counter()
    n = synchronous_parallel_sample(workers, steps).count
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8, help="envs in total, in every setting")
    parser.add_argument("--step-us", type=float, default=200.0, help="busy microseconds per env step")
    parser.add_argument("--steps", type=int, default=8000, help="env steps per timed run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from rlfleet.env.registry import register_env
    from rlfleet.utils.ray_utils import init_ray

    register_env("busy_cartpole", make_busy_cartpole)
    n = args.envs
    settings = {
        "1 process, rlfleet's vector": {"num_envs_per_worker": n},
        "1 process, 'sync'": {"num_envs_per_worker": n, "gym_env_vectorize_mode": "sync"},
        f"'async' ({n} env processes)": {"num_envs_per_worker": n, "gym_env_vectorize_mode": "async"},
        "2 Ray workers": {"num_workers": 2, "num_envs_per_worker": n // 2},
    }
    init_ray(num_cpus=2)
    sets = {name: worker_set(s, args.step_us) for name, s in settings.items()}
    rates = {name: [] for name in settings}
    for _ in range(args.rounds):
        for name, workers in sets.items():
            rates[name].append(rate(workers, args.steps))
    for workers in sets.values():
        workers.stop()
    base = rates["1 process, rlfleet's vector"]
    print(f"CartPole-v1 + {args.step_us:.0f} us of work per step, {n} envs in total, {os.cpu_count()} cores, load "
          f"average {os.getloadavg()[0]:.1f}; median (min-max) of {args.rounds} interleaved rounds of {args.steps} "
          "steps")
    print(f"{'setting':>30} | {'env steps/s':>11} | vs 1 process, same round")
    for name, values in rates.items():
        ratios = [v / b for v, b in zip(values, base)]
        print(f"{name:>30} | {statistics.median(values):>11,.0f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
