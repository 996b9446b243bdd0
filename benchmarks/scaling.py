"""A scaling model of the four execution patterns, calibrated on this machine.

It measures, here and in one process, the per-env-step costs of each part (sampling,
each algorithm's learning, A3C's gradients, Ape-X's worker-side priorities) and the Ray
round trip (an empty actor call, and one that returns a sample batch). From them it
predicts the env steps per second of each pattern for 1..256 remote workers, each worker
with a core of its own (a cluster), and names the resource that saturates first:

- sync PPO: sample a train batch on all workers, learn on it, broadcast; the learner's
  time adds to the sampling time (Amdahl), so it saturates on the learner.
- A3C: each worker samples and computes a gradient; the learner applies gradients one by
  one (plus a weight push each): the learner's apply rate caps it.
- IMPALA: workers sample without pause; one process receives every batch, learns in a
  thread on the same GIL: capped by learning + receiving per step in that process.
- APEX: workers sample and prioritise, adding straight to replay shards; the trainer only
  counts and syncs weights; the learner replays at its own rate (independent of sampling):
  capped by the trainer's per-batch bookkeeping (Ray round trips) or the shards.

"Here" lines add this machine's bound: all processes share its cores (CPU seconds per env
step summed over the processes). Then it trains each pattern for a few seconds with 1 and
2 remote workers (CartPole-v1) and prints the measured env steps/s (median of 3 windows,
with min-max) beside the "here" prediction, and the IMPALA / sync PPO ratio at 2 workers.

ES and ARS (`--patterns es ars`) follow their own pattern: see benchmarks/scaling_evolution.py.

    python benchmarks/scaling.py [--measure 1 2] [--window-s 4] [--patterns ppo a3c impala apex es ars]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from scaling_evolution import EVOLUTION_CONFIGS, report as report_evolution  # noqa: E402  (benchmarks/)

ENV = "CartPole-v1"
ENVS, FRAGMENT = 8, 50  # per worker request: B = 400 env steps
B = ENVS * FRAGMENT
COMMON = {"num_envs_per_worker": ENVS, "rollout_fragment_length": FRAGMENT, "seed": 0, "log_sys_usage": False,
          "model": {"fcnet_hiddens": [64, 64]}}
CONFIGS: Dict[str, Tuple[str, dict]] = {
    # The reference's defaults for what each pattern learns per step, scaled to CartPole nets.
    "ppo": ("PPO", {"train_batch_size": 4000, "sgd_minibatch_size": 128, "num_sgd_iter": 30}),
    "a3c": ("A3C", {"grads_per_step": 10, "min_iter_time_s": 0}),
    "impala": ("IMPALA", {"train_batch_size": 500, "min_iter_time_s": 0}),
    "apex": ("APEX", {"train_batch_size": 512, "learning_starts": 1000, "buffer_size": 100000,
                      "num_replay_buffer_shards": 2, "timesteps_per_iteration": 2000, "min_iter_time_s": 0,
                      "hiddens": [64]}),
}


def _timed(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of `fn()` over `repeats` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass
class Costs:
    """Seconds per env step (unless said otherwise), measured here."""

    sample: float        # a worker's sampler (8 envs, one batched forward pass per step)
    learn_ppo: float     # PPO: 30 epochs of minibatch SGD, per train-batch step
    learn_impala: float  # IMPALA: V-trace + one update, per step
    grad_a3c: float      # A3C, on a worker: the gradient of its batch, per step
    apply_a3c: float     # A3C, on the learner: applying one gradient (seconds per gradient)
    prio_apex: float     # Ape-X, on a worker: n-step transitions + initial priorities, per step
    learn_apex: float    # Ape-X, on the learner: one replayed batch of 512 (seconds per batch)
    add_apex: float      # Ape-X, on a shard: storing transitions with their priorities, per step
    replay_apex: float   # Ape-X, on a shard: replaying 512 and updating their priorities (seconds per batch)
    rtt: float           # Ray: an empty actor call (seconds)
    rtt_batch: float     # Ray: an actor call returning a 400-step sample batch (seconds)


def measure_round_trips(batch: object) -> Tuple[float, float]:
    """Seconds of an empty Ray actor call, and of one that returns `batch`."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def __init__(self, batch):
            self.batch = batch

        def noop(self):
            return None

        def get(self):
            return self.batch

    echo = Echo.remote(batch)
    rtt = _timed(lambda: ray.get(echo.noop.remote()), 50)
    rtt_batch = _timed(lambda: ray.get(echo.get.remote()), 50)
    ray.kill(echo)
    return rtt, rtt_batch


def measure_costs(repeats: int = 5) -> Costs:
    from rlfleet.algorithms.apex.replay_shard import learn_replayed, worker_side_transitions
    from rlfleet.policy.sample_batch import SampleBatch
    from rlfleet.registry import get_trainer_class
    from rlfleet.replay import PRIO_WEIGHTS, BATCH_INDEXES
    import numpy as np

    def trainer(pattern: str):
        run, cfg = CONFIGS[pattern]
        return get_trainer_class(run)(env=ENV, config=dict(COMMON, **cfg, num_workers=0))

    ppo = trainer("ppo")
    local = ppo.workers.local_worker()
    sample = _timed(local.sample, repeats) / B
    big = SampleBatch.concat_samples([local.sample() for _ in range(10)])
    policy = ppo.get_policy()
    learn_ppo = _timed(lambda: policy.multi_epoch_sgd(big, 30, 128), 2) / big.count
    ppo.stop()

    impala = trainer("impala")
    batch = SampleBatch.concat_samples([impala.workers.local_worker().sample() for _ in range(2)])
    learn_impala = _timed(lambda: impala.get_policy().learn_on_batch(batch), repeats) / batch.count
    impala.stop()

    a3c = trainer("a3c")
    pol = a3c.get_policy()
    batch = a3c.workers.local_worker().sample()
    grad_a3c = _timed(lambda: pol.compute_gradients(batch), repeats) / batch.count
    grads, _ = pol.compute_gradients(batch)
    apply_a3c = _timed(lambda: pol.apply_gradients(grads), repeats)
    a3c.stop()

    apex = trainer("apex")
    worker = apex.workers.local_worker()
    batch = worker.sample()
    prio_apex = _timed(lambda: worker_side_transitions(worker, batch), repeats) / batch.count
    transitions, _ = worker_side_transitions(worker, SampleBatch.concat_samples([worker.sample() for _ in range(2)]))[
        "default_policy"]
    replayed = transitions.slice(0, 512) if transitions.count >= 512 else transitions
    replayed[PRIO_WEIGHTS] = np.ones(replayed.count, np.float32)
    replayed[BATCH_INDEXES] = np.arange(replayed.count)
    learn_apex = _timed(lambda: learn_replayed(apex.get_policy(), replayed, 1e-6), repeats) * 512 / replayed.count
    from rlfleet.algorithms.apex.replay_shard import ReplayShard

    shard = ReplayShard(apex.config, 0, 100000, 0)
    items = worker_side_transitions(worker, batch)
    add_apex = _timed(lambda: shard.add(items), repeats) / batch.count
    for _ in range(20):
        shard.add(items)

    def replay_and_update():
        out = shard.replay(512, 0.4)["default_policy"]
        shard.update_priorities({"default_policy": (out[BATCH_INDEXES], np.ones(out.count))})

    replay_apex = _timed(replay_and_update, repeats)
    apex.stop()

    rtt, rtt_batch = measure_round_trips(batch)
    return Costs(sample, learn_ppo, learn_impala, grad_a3c, apply_a3c, prio_apex, learn_apex, add_apex, replay_apex,
                 rtt, rtt_batch)


def predict(pattern: str, n: int, c: Costs, cores: float = math.inf) -> Tuple[float, str]:
    """`(env steps/s, the resource that saturates first)` for `n` remote workers, each with a
    core of its own, within `cores` cores in all (inf: a cluster)."""
    if pattern == "ppo":
        t = CONFIGS["ppo"][1]["train_batch_size"]
        rounds = math.ceil(t / (n * B))
        sampling = rounds * (B * c.sample + c.rtt_batch)
        learning = t * c.learn_ppo + c.rtt  # + one weight broadcast
        bounds = {"workers+learner": t / (sampling + learning)}
        cpu = c.sample + c.learn_ppo + c.rtt_batch / B
        if learning > sampling:
            bounds = {"learner (serial)": bounds["workers+learner"]}
    elif pattern == "a3c":
        bounds = {"workers": n * B / (B * (c.sample + c.grad_a3c) + 2 * c.rtt),
                  "learner (apply+push)": B / (c.apply_a3c + 2 * c.rtt)}
        cpu = c.sample + c.grad_a3c + (c.apply_a3c + 2 * c.rtt) / B
    elif pattern == "impala":
        bounds = {"workers": n / c.sample,
                  "trainer (learn+receive)": 1.0 / (c.learn_impala + (c.rtt_batch + c.rtt) / B)}
        cpu = c.sample + c.learn_impala + (c.rtt_batch + c.rtt) / B
    elif pattern == "apex":
        bounds = {"workers": n / (c.sample + c.prio_apex),
                  "trainer (round trips)": B / (2 * c.rtt)}
        # The learner thread replays all the time whatever the sampling rate: one core, plus
        # the shards' share serving it (replays are pipelined, so both are busy).
        cpu = c.sample + c.prio_apex + c.add_apex + 2 * c.rtt / B
        cores = cores - (1 + c.replay_apex / c.learn_apex)
    else:
        raise ValueError(pattern)
    if math.isfinite(cores):
        bounds[f"{cores:.3g} cores"] = max(cores, 0.1) / cpu
    name = min(bounds, key=bounds.get)
    return bounds[name], name


def measure_throughput(pattern: str, n: int, window_s: float, windows: int = 3) -> List[float]:
    """Env steps/s of a real trainer with `n` remote workers, one value per window."""
    from rlfleet.registry import get_trainer_class

    run, cfg = CONFIGS[pattern]
    trainer = get_trainer_class(run)(env=ENV, config=dict(COMMON, **cfg, num_workers=n))
    try:
        trainer.train()  # warm-up (and, for Ape-X, learning_starts)
        out = []
        for _ in range(windows):
            start, steps0 = time.perf_counter(), trainer.counters["num_env_steps_sampled"]
            while time.perf_counter() - start < window_s:
                trainer.train()
            out.append((trainer.counters["num_env_steps_sampled"] - steps0) / (time.perf_counter() - start))
        return out
    finally:
        trainer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patterns", nargs="+", default=list(CONFIGS) + list(EVOLUTION_CONFIGS),
                        choices=list(CONFIGS) + list(EVOLUTION_CONFIGS))
    parser.add_argument("--measure", nargs="*", type=int, default=[1, 2], help="remote workers to measure")
    parser.add_argument("--window-s", type=float, default=4.0)
    parser.add_argument("--cores", type=float, default=float(os.cpu_count() or 1))
    args = parser.parse_args()

    import ray
    import torch

    torch.set_num_threads(1)
    ray.init(num_cpus=max(2, int(args.cores)), include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    evolution = [p for p in args.patterns if p in EVOLUTION_CONFIGS]
    args.patterns = [p for p in args.patterns if p in CONFIGS]
    if not args.patterns:  # ES / ARS only: they need the round trip alone
        report_evolution(evolution, args.measure, measure_round_trips(None)[0], args.cores, args.window_s)
        ray.shutdown()
        return
    costs = measure_costs()
    print("Measured costs (CartPole-v1, 8 envs x 50 steps per worker batch):")
    for name, value in vars(costs).items():
        unit = "s" if name in ("apply_a3c", "learn_apex", "replay_apex", "rtt", "rtt_batch") else "s/step"
        print(f"  {name:>13}: {value * 1e6:9.1f} us ({unit})")
    print("\nPredicted env steps/s, one core per worker (a cluster), and what saturates first:")
    print(f"{'workers':>8} " + " ".join(f"{p:>34}" for p in args.patterns))
    for n in [1, 2, 4, 8, 16, 32, 64, 128, 256]:
        cells = []
        for p in args.patterns:
            value, what = predict(p, n, costs)
            cells.append(f"{value:9.0f} {what:>24}")
        print(f"{n:>8} " + " ".join(cells))
    if args.measure:
        print(f"\nHere ({args.cores:g} cores shared by the trainer and its workers): predicted vs measured "
              "(median of 3 windows, min-max):")
        medians: Dict[Tuple[str, int], float] = {}
        for p in args.patterns:
            for n in args.measure:
                value, what = predict(p, n, costs, args.cores)
                got = measure_throughput(p, n, args.window_s)
                medians[p, n] = statistics.median(got)
                print(f"  {p:>6} {n} worker(s): predicted {value:8.0f} ({what}); measured {medians[p, n]:8.0f} "
                      f"[{min(got):.0f}-{max(got):.0f}]", flush=True)
        if ("impala", 2) in medians and ("ppo", 2) in medians:
            print(f"\nIMPALA / sync PPO env steps/s with 2 workers: {medians['impala', 2] / medians['ppo', 2]:.2f}")
    if evolution:
        report_evolution(evolution, args.measure, costs.rtt, args.cores, args.window_s)
    ray.shutdown()


if __name__ == "__main__":
    main()
