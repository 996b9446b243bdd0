"""ES and ARS in the scaling model (`benchmarks/scaling.py` adds these rows).

Both run the same pattern: each iteration the driver hands `theta` (one put) to the
perturbation workers, which run episodes and answer with returns only; the driver then
updates `theta` alone (a weighted sum of `directions` noise slices of `num_params` entries)
while the workers wait. One iteration of S env steps and N directions with n workers takes

    S * rollout / n  +  N * update  +  tasks per worker * rtt

so the workers scale it until the serial update dominates. Measured here, in one process:
`rollout` (seconds per env step of a perturbation worker) and `update` (driver seconds per
direction), from one real iteration of each algorithm with the tuned CartPole settings.

Also measured with 1 and 2 remote workers: env steps/s (median of 3 windows), the bytes
the workers send back per iteration (indices, returns, lengths, filter statistics), and
each worker's memory: RSS (which counts the pages of the shared noise table it touched)
and USS (its own pages only). With the table mapped from the object store, the USS of a
worker stays far below the table's size and the node holds one copy, however many workers.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Dict, List, Tuple

ENV = "CartPole-v1"
NOISE_SIZE = 25_000_000  # the tuned examples' (100 MB of float32)
EVOLUTION_CONFIGS: Dict[str, Tuple[str, dict]] = {
    "es": ("ES", {"episodes_per_batch": 50, "noise_size": NOISE_SIZE, "seed": 0}),
    "ars": ("ARS", {"num_rollouts": 50, "rollouts_used": 25, "noise_stdev": 0.02, "sgd_stepsize": 0.01,
                    "eval_prob": 0.5, "noise_size": NOISE_SIZE, "model": {"fcnet_hiddens": []}, "seed": 0}),
}


@dataclass
class EvolutionCosts:
    rollout: float  # seconds per env step of a perturbation worker
    update: float  # driver seconds per direction (the update of theta)
    steps: int  # env steps of the measured iteration
    directions: int  # directions of the measured iteration
    tasks: int  # tasks of the measured iteration (one process)


def measure_evolution_costs(pattern: str) -> EvolutionCosts:
    from rlfleet.registry import get_trainer_class

    run, cfg = EVOLUTION_CONFIGS[pattern]
    trainer = get_trainer_class(run)(env=ENV, config=dict(cfg, num_workers=0))
    try:
        trainer.train()  # warm-up
        filt = trainer.workers.local_worker().filters["default_policy"]
        batch = trainer.collection()
        start = time.perf_counter()
        trainer.pool.run(trainer.theta, filt.get_state(), batch.next_task, batch.add)
        rollout = (time.perf_counter() - start) / max(batch.steps, 1)
        start = time.perf_counter()
        trainer.update(batch)
        update = (time.perf_counter() - start) / max(len(batch.indices), 1)
        return EvolutionCosts(rollout, update, batch.steps, len(batch.indices), len(batch.results))
    finally:
        trainer.stop()


def predict_evolution(c: EvolutionCosts, n: int, rtt: float, cores: float = math.inf) -> Tuple[float, str]:
    """`(env steps/s, what bounds it)` for `n` remote workers (one core each) within `cores`."""
    workers = c.steps * c.rollout / n
    driver = c.directions * c.update + math.ceil(c.tasks / n) * rtt
    bounds = {"workers+update": c.steps / (workers + driver)}
    if driver > workers:
        bounds = {"update (serial)": bounds["workers+update"]}
    if math.isfinite(cores):
        bounds[f"{cores:.3g} cores"] = cores / (c.rollout + driver / c.steps)
    name = min(bounds, key=bounds.get)
    return bounds[name], name


def measure_evolution(pattern: str, n: int, window_s: float, windows: int = 3) -> Dict[str, object]:
    """Env steps/s per window, bytes received per iteration and the workers' memory with
    `n` remote workers."""
    import psutil

    from rlfleet.registry import get_trainer_class

    run, cfg = EVOLUTION_CONFIGS[pattern]
    trainer = get_trainer_class(run)(env=ENV, config=dict(cfg, num_workers=n))
    try:
        trainer.train()
        rates: List[float] = []
        bytes_per_iter: List[int] = []
        for _ in range(windows):
            start, steps0 = time.perf_counter(), trainer.counters["num_env_steps_sampled"]
            while time.perf_counter() - start < window_s:
                bytes_per_iter.append(trainer.train()["info"]["bytes_received_this_iter"])
            rates.append((trainer.counters["num_env_steps_sampled"] - steps0) / (time.perf_counter() - start))
        pids = trainer.pool.foreach_env(lambda env: __import__("os").getpid())
        memory = [psutil.Process(pid).memory_full_info() for pid in pids]
        return {"rates": rates, "bytes": statistics.median(bytes_per_iter),
                "rss_mb": [m.rss / 2 ** 20 for m in memory], "uss_mb": [m.uss / 2 ** 20 for m in memory]}
    finally:
        trainer.stop()


def report(patterns: List[str], measure: List[int], rtt: float, cores: float, window_s: float) -> None:
    """Prints the ES / ARS rows: predictions for 1..256 workers, then measurements here."""
    costs = {p: measure_evolution_costs(p) for p in patterns}
    print(f"\nES / ARS (CartPole-v1, tuned settings; noise table {NOISE_SIZE * 4 / 2 ** 20:.0f} MB):")
    for p, c in costs.items():
        print(f"  {p:>4}: rollout {c.rollout * 1e6:.1f} us/step, update {c.update * 1e6:.1f} us/direction, "
              f"{c.steps} steps and {c.directions} directions per iteration")
    print(f"{'workers':>8} " + " ".join(f"{p:>34}" for p in patterns))
    for n in [1, 2, 4, 8, 16, 32, 64, 128, 256]:
        cells = []
        for p in patterns:
            value, what = predict_evolution(costs[p], n, rtt)
            cells.append(f"{value:9.0f} {what:>24}")
        print(f"{n:>8} " + " ".join(cells))
    for p in patterns:
        for n in measure:
            value, what = predict_evolution(costs[p], n, rtt, cores)
            got = measure_evolution(p, n, window_s)
            rates = got["rates"]
            print(f"  {p:>4} {n} worker(s): predicted {value:8.0f} ({what}); measured {statistics.median(rates):8.0f} "
                  f"[{min(rates):.0f}-{max(rates):.0f}] env steps/s; {got['bytes']:.0f} bytes received per "
                  f"iteration; per worker RSS {', '.join(f'{x:.0f}' for x in got['rss_mb'])} MB, "
                  f"USS {', '.join(f'{x:.0f}' for x in got['uss_mb'])} MB", flush=True)
