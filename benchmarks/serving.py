"""Serving throughput and latency (medians of `--repeats` runs, default 3).

1. Env steps/s of CartPole-v1 collected by a PPO worker ([64, 64] net, no learning):
   the in-process sampler (vectorised fast path, 1 env), the same env as an in-process
   `ExternalEnv` (rollout/external_sampler.py), and a simulator process driving a
   `PolicyServerInput` through a `PolicyClient` in "remote" and in "local" inference mode
   (examples/serving/cartpole_client.py; the server's batches pulled with `next()`).
2. `rlfleet serve` (its own process) on a checkpoint of that policy: requests/s and p50 / p99
   latency of `compute_actions` with one observation per request, from 1 client and from 8
   concurrent clients (threads, one keep-alive connection each).

    .venv/bin/python benchmarks/serving.py [--seconds 3] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

import gymnasium as gym
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlfleet.env.examples.external_cartpole import ExternalCartPole  # noqa: E402
from rlfleet.registry import get_trainer_class  # noqa: E402
from rlfleet.serving import policy_server_input  # noqa: E402
from rlfleet.serving.http_client import HTTPClient  # noqa: E402
from tests.serving_helpers import free_port, start_client, stop  # noqa: E402

PPO = {"seed": 0, "num_workers": 0, "rollout_fragment_length": 256, "train_batch_size": 512,
       "sgd_minibatch_size": 128, "input_evaluation": [], "model": {"fcnet_hiddens": [64, 64]}}
OBS = [0.01, 0.02, -0.03, 0.04]


def steps_per_s(sample: Callable[[], int], seconds: float) -> float:
    sample()  # warm-up (a client process connects, first forward passes)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += sample()
    return steps / (time.perf_counter() - start)


def sampler_rates(seconds: float) -> Dict[str, float]:
    out = {}
    for name, env in (("in-process sampler (CartPole-v1)", "CartPole-v1"),
                      ("in-process ExternalEnv", ExternalCartPole)):
        trainer = get_trainer_class("PPO")(env=env, config=PPO)
        worker = trainer.workers.local_worker()
        out[name] = steps_per_s(lambda: worker.sample().count, seconds)
        trainer.stop()
    cartpole = gym.make("CartPole-v1")
    for mode in ("remote", "local"):
        port = free_port()
        config = dict(PPO, env=None, observation_space=cartpole.observation_space, action_space=cartpole.action_space,
                      input=policy_server_input(base_port=port))
        trainer = get_trainer_class("PPO")(config=config)
        reader = trainer.workers.local_worker().sampler.reader
        client = start_client(port, mode, "--update-interval", "1000")
        out[f"client process, {mode} inference"] = steps_per_s(lambda: reader.next().count, seconds)
        stop(client)
        reader.close()
        trainer.stop()
    return out


def latency(url: str, clients: int, seconds: float) -> Dict[str, float]:
    times: List[float] = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def run() -> None:
        http = HTTPClient(url)
        http.call("/v1/compute_actions", {"observations": [OBS]})
        mine = []
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            http.call("/v1/compute_actions", {"observations": [OBS]})
            mine.append(time.perf_counter() - t0)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    times.sort()
    return {"requests_per_s": len(times) / elapsed, "p50_ms": 1000 * times[len(times) // 2],
            "p99_ms": 1000 * times[int(len(times) * 0.99)]}


def serve_rates(seconds: float, repeats: int) -> Dict[str, Dict[str, float]]:
    tmp = tempfile.mkdtemp(prefix="rlfleet-serve-bench-")
    trainer = get_trainer_class("PPO")(env="CartPole-v1", config=PPO)
    trainer.train()
    ckpt = trainer.save(tmp)
    trainer.stop()
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "rlfleet.cli", "serve", ckpt, "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdout.readline()  # "serving on ..."
        url = f"http://127.0.0.1:{port}"
        out = {}
        for clients in (1, 8):
            runs = [latency(url, clients, seconds) for _ in range(repeats)]
            out[f"{clients} client(s), batch 1"] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        return out
    finally:
        proc.kill()
        proc.communicate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs = [sampler_rates(args.seconds) for _ in range(args.repeats)]
    steps = {k: round(statistics.median(r[k] for r in runs)) for k in runs[0]}
    print(json.dumps({"env_steps_per_s": steps}, indent=1), flush=True)
    serve = serve_rates(args.seconds, args.repeats)
    print(json.dumps({"rlfleet_serve": {k: {m: round(v, 2) for m, v in r.items()} for k, r in serve.items()}},
                     indent=1))


if __name__ == "__main__":
    main()
