"""Soak test: memory of long runs. Not part of CI.

Trains PPO (and DQN, whose replay buffer fills up early and then stays full) on CartPole-v1
for `--steps` env steps in one process, sampling the process's resident memory (RSS, from
/proc/self/status) every `--every` seconds. After the warm-up (the first `--warmup` of the
steps; for DQN also until the buffer is full) the RSS must grow by less than 5 %.

    .venv/bin/python benchmarks/soak.py                          # PPO and DQN, 1M steps each
    .venv/bin/python benchmarks/soak.py --algo ppo --steps 200000 --every 5

Prints one JSON line per algorithm: RSS (MiB) at warm-up end, at 100k steps and at the end,
the growth after warm-up, and for DQN the bytes the replay buffer allocated (once, at its
first insert: the same number when it is first full and at the end).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

import torch

from rlfleet.registry import get_trainer_class

CONFIGS: Dict[str, Dict[str, Any]] = {
    "ppo": {"train_batch_size": 4000, "rollout_fragment_length": 500, "num_envs_per_worker": 8,
            "sgd_minibatch_size": 500, "num_sgd_iter": 4, "lr": 3e-4, "model": {"fcnet_hiddens": [64, 64]},
            "log_sys_usage": True, "seed": 0},
    "dqn": {"buffer_size": 50_000, "learning_starts": 1000, "rollout_fragment_length": 16,
            "num_envs_per_worker": 4, "train_batch_size": 32, "hiddens": [64],
            "model": {"fcnet_hiddens": [64]}, "timesteps_per_iteration": 5000, "min_iter_time_s": 0,
            "log_sys_usage": True, "seed": 0},
}
GROWTH_LIMIT = 0.05


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def buffer_bytes(trainer: Any) -> int:
    """Bytes of every array the trainer's replay buffers hold (storage and priority trees)."""
    total = 0
    for buffer in getattr(trainer, "replay_buffers", {}).values():
        seen = set()
        stack = [vars(buffer)]
        while stack:
            obj = stack.pop()
            values = obj.values() if isinstance(obj, dict) else vars(obj).values() if hasattr(obj, "__dict__") else ()
            for v in values:
                if id(v) in seen:
                    continue
                seen.add(id(v))
                if hasattr(v, "nbytes") and hasattr(v, "dtype"):
                    total += int(v.nbytes)
                elif isinstance(v, dict) or (hasattr(v, "__dict__") and type(v).__module__.startswith("rlfleet")):
                    stack.append(v)
    return total


def soak(algo: str, steps: int, every: float, warmup: float) -> Dict[str, Any]:
    cls = get_trainer_class(algo.upper())
    trainer = cls(env="CartPole-v1", config=CONFIGS[algo], logdir=tempfile.mkdtemp(prefix=f"soak_{algo}_"))
    samples: List[Tuple[int, float, float]] = []  # (env steps, seconds, RSS MiB)
    start = last_sample = time.time()
    warm_steps = int(steps * warmup)
    at_100k = None
    buffer_when_full = None
    try:
        while True:
            result = trainer.train()
            t = result["timesteps_total"]
            now = time.time()
            if now - last_sample >= every or t >= steps:
                samples.append((t, now - start, rss_mib()))
                last_sample = now
            if at_100k is None and t >= 100_000:
                at_100k = rss_mib()
            if algo == "dqn" and buffer_when_full is None:
                buffer = trainer.local_replay_buffer
                if buffer is not None and len(buffer) >= CONFIGS[algo]["buffer_size"]:
                    buffer_when_full = (t, buffer_bytes(trainer))
                    warm_steps = max(warm_steps, t)
            if t >= steps:
                break
    finally:
        trainer.stop()
    after_warmup = [s for s in samples if s[0] >= warm_steps]
    base = after_warmup[0][2] if after_warmup else samples[0][2]
    peak_after = max(s[2] for s in after_warmup) if after_warmup else base
    out: Dict[str, Any] = {
        "algo": algo, "steps": samples[-1][0], "seconds": round(samples[-1][1], 1),
        "warmup_steps": warm_steps, "rss_mib_at_warmup_end": round(base, 1),
        "rss_mib_at_100k": None if at_100k is None else round(at_100k, 1),
        "rss_mib_at_end": round(samples[-1][2], 1), "rss_mib_peak_after_warmup": round(peak_after, 1),
        "growth_after_warmup": round((samples[-1][2] - base) / base, 4),
        "peak_growth_after_warmup": round((peak_after - base) / base, 4),
        "samples": [(s[0], round(s[1], 1), round(s[2], 1)) for s in samples],
    }
    if algo == "dqn":
        out["buffer_bytes_when_full"] = buffer_when_full
        out["buffer_bytes_at_end"] = buffer_bytes(trainer)
    out["ok"] = out["growth_after_warmup"] < GROWTH_LIMIT
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=["ppo", "dqn", "both"], default="both")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between RSS samples")
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of the steps that is warm-up")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ok = True
    for algo in (["ppo", "dqn"] if args.algo == "both" else [args.algo]):
        report = soak(algo, args.steps, args.every, args.warmup)
        ok &= report["ok"]
        print(json.dumps(report), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
