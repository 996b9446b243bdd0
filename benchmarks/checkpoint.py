"""Checkpoint size and save / restore / from_checkpoint times for the default PPO model
(fcnet_hiddens [256, 256], separate value net, CartPole-v1), after one training iteration.

    .venv/bin/python benchmarks/checkpoint.py [--repeats 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.checkpoint import read_checkpoint
from rlfleet.trainer import Trainer


def _folder_bytes(path: str) -> dict:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="rlfleet-ckpt-bench-")
    config = {"seed": 0, "train_batch_size": 1000, "rollout_fragment_length": 250, "num_envs_per_worker": 4,
              "sgd_minibatch_size": 128, "num_sgd_iter": 2}
    trainer = PPOTrainer(config=config, env="CartPole-v1", logdir=os.path.join(tmp, "run"))
    trainer.train()
    n_params = sum(p.numel() for p in trainer.get_policy().model.parameters())

    save_ms, read_ms, restore_ms = [], [], []
    path = None
    for i in range(args.repeats):
        t0 = time.perf_counter()
        path = trainer.save(os.path.join(tmp, "ckpts"))
        save_ms.append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        read_checkpoint(path)
        read_ms.append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        trainer.restore(path)
        restore_ms.append(1000 * (time.perf_counter() - t0))
    t0 = time.perf_counter()
    rebuilt = Trainer.from_checkpoint(path, logdir=os.path.join(tmp, "rebuilt"))
    from_ckpt_ms = 1000 * (time.perf_counter() - t0)
    t0 = time.perf_counter()
    PPOTrainer(config=config, env="CartPole-v1", logdir=os.path.join(tmp, "fresh")).stop()
    construct_ms = 1000 * (time.perf_counter() - t0)

    sizes = _folder_bytes(path)
    total = sum(sizes.values())
    print(f"default PPO model: {n_params} parameters = {4 * n_params} bytes of float32 weights")
    print(f"checkpoint: {total} bytes ({total / (4 * n_params):.2f}x the weights)")
    for name, size in sorted(sizes.items()):
        print(f"  {size:>9}  {name}")
    med = statistics.median
    print(f"save (incl. fsync)       median {med(save_ms):7.2f} ms  min {min(save_ms):7.2f} ms")
    print(f"read + verify            median {med(read_ms):7.2f} ms  min {min(read_ms):7.2f} ms")
    print(f"restore (read + apply)   median {med(restore_ms):7.2f} ms  min {min(restore_ms):7.2f} ms")
    print(f"from_checkpoint          {from_ckpt_ms:7.2f} ms (building a trainer alone: {construct_ms:.2f} ms)")
    rebuilt.stop()
    trainer.stop()


if __name__ == "__main__":
    main()
