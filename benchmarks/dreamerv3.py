"""DreamerV3 (XS) benchmarks: learning runs and the wall time per 1k env steps.

    # learning: CartPole-v1 (target 450 within 100k env steps), Pendulum-v1 (-400 within 50k)
    python benchmarks/dreamerv3.py learn --env CartPole-v1 --steps 100000 --ratio 512 --log out.jsonl
    python benchmarks/dreamerv3.py learn --env Pendulum-v1 --steps 50000 --ratio 512

    # wall time per 1k env steps once learning runs (median of --repeats measurements)
    python benchmarks/dreamerv3.py time --ratios 512 64 --repeats 3
    # where that does not fit (slow CPUs): medians of one update and one env step, and the
    # time per 1k env steps they imply at each ratio
    python benchmarks/dreamerv3.py update-time --ratios 512 64 --repeats 5

`learn` prints (and appends to `--log`) one JSON line per iteration: env steps, the mean
return of the last 100 episodes, wall seconds; it stops at the target or the step budget.
`time` prefills past `learning_starts`, then times `--measure-steps` env steps at each
ratio and scales to 1k steps.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Dict, List

from rlfleet.registry import get_trainer_class

TARGETS: Dict[str, float] = {"CartPole-v1": 450.0, "Pendulum-v1": -400.0}


def make_trainer(env: str, ratio: float, seed: int, **extra):
    config = {"env": env, "seed": seed, "training_ratio": ratio, "model_size": "XS", **extra}
    return get_trainer_class("DreamerV3")(config=config)


def learn(env: str, steps: int, ratio: float, seed: int, log: str = "") -> Dict[str, float]:
    trainer = make_trainer(env, ratio, seed)
    target, start, best = TARGETS.get(env), time.time(), float("-inf")
    try:
        while True:
            result = trainer.train()
            ret = result.get("episode_reward_mean")
            best = max(best, ret) if ret == ret and ret is not None else best
            line = {"env": env, "ratio": ratio, "seed": seed, "env_steps": result["timesteps_total"],
                    "episode_reward_mean": ret, "wall_s": round(time.time() - start, 1)}
            print(json.dumps(line), flush=True)
            if log:
                with open(log, "a") as f:
                    f.write(json.dumps(line) + "\n")
            if (target is not None and ret is not None and ret >= target) or result["timesteps_total"] >= steps:
                return {**line, "best": best, "reached": target is not None and best >= target}
    finally:
        trainer.stop()


def time_per_1k(env: str, ratios: List[float], repeats: int, measure_steps: int, seed: int) -> Dict[str, dict]:
    out = {}
    for ratio in ratios:
        trainer = make_trainer(env, ratio, seed, timesteps_per_iteration=measure_steps, learning_starts=1024)
        try:
            while trainer.counters["num_env_steps_sampled"] < 1024:  # past learning_starts: updates run
                trainer.train()
            times = []
            for _ in range(repeats):
                before, t0 = trainer.counters["num_env_steps_sampled"], time.perf_counter()
                trainer.train()
                steps = trainer.counters["num_env_steps_sampled"] - before
                times.append((time.perf_counter() - t0) * 1000.0 / steps)
        finally:
            trainer.stop()
        out[str(ratio)] = {"median_s_per_1k": statistics.median(times), "min": min(times), "max": max(times),
                           "runs": times}
        print(json.dumps({"env": env, "ratio": ratio, **out[str(ratio)]}), flush=True)
    return out


def update_and_step_times(env: str, repeats: int, seed: int, ratios: List[float]) -> Dict[str, float]:
    """Where a full 1k-step measurement does not fit: the median wall time of one update
    (`batch_size` x `batch_length` replayed steps) and of one env step (acting + storing),
    and the time per 1k env steps they imply at each ratio:
    1000 * step + 1000 * ratio / (batch_size * batch_length) * update."""
    trainer = make_trainer(env, 64, seed, timesteps_per_iteration=200, learning_starts=10 ** 9)
    try:
        step_times = []
        for _ in range(repeats):  # learning_starts out of reach: sampling and storing only
            before, t0 = trainer.counters["num_env_steps_sampled"], time.perf_counter()
            trainer.train()
            step_times.append((time.perf_counter() - t0) / (trainer.counters["num_env_steps_sampled"] - before))
        policy, buffer = trainer.get_policy(), trainer.local_replay_buffer
        update_times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            policy.learn_on_batch(buffer.sample(trainer.config["batch_size"]))
            update_times.append(time.perf_counter() - t0)
        per_update = trainer.config["batch_size"] * trainer.config["batch_length"]
    finally:
        trainer.stop()
    step, update = statistics.median(step_times), statistics.median(update_times)
    out = {"step_s": step_times, "update_s": update_times, "median_step_s": step, "median_update_s": update}
    for ratio in ratios:
        out[f"s_per_1k_at_{ratio:g}"] = 1000 * step + 1000 * ratio / per_update * update
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("learn")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--ratio", type=float, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default="")
    t = sub.add_parser("time")
    t.add_argument("--env", default="CartPole-v1")
    t.add_argument("--ratios", type=float, nargs="+", default=[512, 64])
    t.add_argument("--repeats", type=int, default=3)
    t.add_argument("--measure-steps", type=int, default=200)
    t.add_argument("--seed", type=int, default=0)
    u = sub.add_parser("update-time")
    u.add_argument("--env", default="CartPole-v1")
    u.add_argument("--ratios", type=float, nargs="+", default=[512, 64])
    u.add_argument("--repeats", type=int, default=3)
    u.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.cmd == "learn":
        print(json.dumps(learn(args.env, args.steps, args.ratio, args.seed, args.log)))
    elif args.cmd == "update-time":
        update_and_step_times(args.env, args.repeats, args.seed, args.ratios)
    else:
        time_per_1k(args.env, args.ratios, args.repeats, args.measure_steps, args.seed)


if __name__ == "__main__":
    main()
