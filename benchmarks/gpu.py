"""Learner throughput (SGD samples per second) of PPO and SAC on each device setup.

With CUDA: 1 tower on the GPU (`num_gpus: 1`) against the CPU (`num_gpus: 0`), plus N real
GPU towers when `--towers N` and N GPUs are visible. Without CUDA (and always, with
`--fake`): 1 CPU tower against 2 fake towers (`_fake_gpus: True, num_gpus: 2`), i.e. what the
split of each minibatch costs on a CPU. Only learning is timed, on a fixed batch sampled
once: PPO's `multi_epoch_sgd` over a 4000-step CartPole batch (minibatches of 128 by
default), SAC's `learn_on_batch` on replayed Pendulum batches of 256.

    .venv/bin/python benchmarks/gpu.py [--repeats 3] [--hiddens 256 256] [--fake] [--towers 2]

Prints one line per (algorithm, setup): the median samples/s of `--repeats` runs, their
spread (min-max), and the ratio to the CPU / one-tower baseline.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Tuple

import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import standardized


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ppo_learner(setup: Dict, hiddens: List[int], minibatch: int, logdir: str) -> Callable[[], Tuple[int, float]]:
    config = {"seed": 0, "log_sys_usage": False, "num_envs_per_worker": 8, "rollout_fragment_length": 500,
              "train_batch_size": 4000, "sgd_minibatch_size": minibatch, "num_sgd_iter": 1,
              "model": {"fcnet_hiddens": hiddens}, **setup}
    trainer = PPOTrainer(env="CartPole-v1", config=config, logdir=logdir)
    batch = trainer.workers.local_worker().sample()
    batch[SampleBatch.ADVANTAGES] = standardized(batch[SampleBatch.ADVANTAGES])
    policy = trainer.get_policy()
    policy.multi_epoch_sgd(batch.copy(), 1, minibatch)  # warm-up (allocations, CUDA context)

    def run() -> Tuple[int, float]:
        _sync(policy.device)
        start = time.perf_counter()
        policy.multi_epoch_sgd(batch.copy(), 2, minibatch)  # includes the once-per-batch copy to the device
        _sync(policy.device)
        return 2 * batch.count, time.perf_counter() - start

    return run


def sac_learner(setup: Dict, hiddens: List[int], minibatch: int, logdir: str) -> Callable[[], Tuple[int, float]]:
    config = {"seed": 0, "log_sys_usage": False, "learning_starts": 0, "timesteps_per_iteration": 2000,
              "rollout_fragment_length": 2000, "train_batch_size": minibatch, "min_iter_time_s": 0,
              "Q_model": {"fcnet_hiddens": hiddens}, "policy_model": {"fcnet_hiddens": hiddens}, **setup}
    trainer = SACTrainer(env="Pendulum-v1", config=config, logdir=logdir)
    trainer.train()  # fills the buffer
    batches = [trainer.local_replay_buffer.sample(minibatch) for _ in range(20)]
    policy = trainer.get_policy()
    policy.learn_on_batch(batches[0].copy())  # warm-up

    def run() -> Tuple[int, float]:
        _sync(policy.device)
        start = time.perf_counter()
        for b in batches:
            policy.learn_on_batch(b.copy())
        _sync(policy.device)
        return minibatch * len(batches), time.perf_counter() - start

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hiddens", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--ppo-minibatch", type=int, default=128)
    parser.add_argument("--sac-minibatch", type=int, default=256)
    parser.add_argument("--fake", action="store_true", help="also 1 vs 2 fake towers when CUDA is there")
    parser.add_argument("--towers", type=int, default=0, help="also N real GPU towers (needs N GPUs)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    setups: List[Tuple[str, Dict]] = []
    if torch.cuda.is_available():
        setups += [("cpu", {"num_gpus": 0}), ("gpu x1", {"num_gpus": 1})]
        if args.towers > 1:
            setups.append((f"gpu x{args.towers}", {"num_gpus": args.towers}))
        print(f"CUDA: {torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} visible)")
    else:
        print("CUDA: none (CPU only): comparing 1 CPU tower with 2 fake towers")
    if args.fake or not torch.cuda.is_available():
        setups += [("1 tower (cpu)", {"num_gpus": 0}), ("2 fake towers", {"num_gpus": 2, "_fake_gpus": True})]
    print(f"hiddens {args.hiddens}, {args.threads} CPU thread(s), median of {args.repeats} (min-max)")
    for name, make, minibatch in (("PPO", ppo_learner, args.ppo_minibatch), ("SAC", sac_learner, args.sac_minibatch)):
        baseline = None
        for label, setup in setups:
            with tempfile.TemporaryDirectory(prefix="rlfleet-gpu-bench-") as logdir:
                run = make(setup, args.hiddens, minibatch, logdir)
                rates = []
                for _ in range(args.repeats):
                    samples, seconds = run()
                    rates.append(samples / seconds)
            med = statistics.median(rates)
            if label in ("cpu", "1 tower (cpu)"):
                baseline = med
            ratio = f"  x{med / baseline:.2f}" if baseline else ""
            print(f"{name:4s} {label:15s} {med:10.0f} samples/s  ({min(rates):.0f}-{max(rates):.0f}){ratio}",
                  flush=True)


if __name__ == "__main__":
    main()
