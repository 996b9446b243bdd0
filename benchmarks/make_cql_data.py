"""Writes the offline dataset of tuned_examples/cql/: a SAC run's whole replay history on
Pendulum-v1, as written by `output`.

SAC learns from scratch (the first `learning_starts` steps random, then its improving
stochastic policy), and `output` writes every sampled batch, so the dataset mixes random,
mediocre and good episodes as a replay buffer does. SAC samples one step per batch
(`rollout_fragment_length: 1`), so the written lines hold one row each; this script then
regroups the rows (unchanged, in order) into lines of `--rows-per-line` rows, with every
column LZ4-compressed (`output_compress_columns`' encoding), which keeps the committed file
small and lets CQL read one episode per line.

    .venv/bin/python benchmarks/make_cql_data.py                      # the committed file
    .venv/bin/python benchmarks/make_cql_data.py --steps 20000 --out /tmp/pendulum-sac.json
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

import numpy as np

from rlfleet.algorithms.sac import SACTrainer
from rlfleet.offline.json_format import decode_line, encode_batch
from rlfleet.policy.sample_batch import SampleBatch

# SAC's tuned example (tuned_examples/sac/pendulum-sac.yaml), fixed here so that the data
# stays reproducible if that file is retuned.
SAC_CONFIG = {
    "seed": 0, "learning_starts": 1000, "train_batch_size": 128, "timesteps_per_iteration": 1000,
    "Q_model": {"fcnet_hiddens": [64, 64]}, "policy_model": {"fcnet_hiddens": [64, 64]},
    "optimization": {"actor_learning_rate": 1e-3, "critic_learning_rate": 1e-3, "entropy_learning_rate": 1e-3},
    "metrics_smoothing_episodes": 10, "min_iter_time_s": 0, "log_sys_usage": False,
}
DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "tuned_examples", "cql", "data", "pendulum-sac.json")


def run_sac(steps: int, folder: str, seed: int) -> None:
    trainer = SACTrainer(env="Pendulum-v1", logdir=os.path.join(folder, "log"),
                         config={**SAC_CONFIG, "seed": seed, "output": os.path.join(folder, "out")})
    start = time.perf_counter()
    while trainer.counters["num_env_steps_sampled"] < steps:
        result = trainer.train()
        print(f"  SAC {result['timesteps_total']:6d} steps: episode_reward_mean {result['episode_reward_mean']:8.1f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    trainer.stop()


def regroup(folder: str, out: str, rows_per_line: int) -> SampleBatch:
    files = sorted(glob.glob(os.path.join(folder, "out", "*.json")))
    batches, normalized = [], None
    for path in files:
        with open(path, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                batch, normalized = decode_line(text, path, number)
                batches.append(batch)
    data = SampleBatch.concat_samples(batches)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    columns = list(data.keys())
    with open(out, "w", encoding="utf-8") as f:
        for start in range(0, data.count, rows_per_line):
            f.write(encode_batch(data.slice(start, start + rows_per_line), columns, normalized) + "\n")
    return data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=15000, help="SAC env steps (rows of the dataset)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows-per-line", type=int, default=200, help="rows per JSON line (200: one episode)")
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        run_sac(args.steps, folder, args.seed)
        data = regroup(folder, args.out, args.rows_per_line)
    ends = np.flatnonzero(data[SampleBatch.TERMINATEDS] | data[SampleBatch.TRUNCATEDS])
    returns = np.add.reduceat(data[SampleBatch.REWARDS], np.r_[0, ends[:-1] + 1])
    print(f"wrote {args.out}: {data.count} rows, {len(ends)} episodes, {os.path.getsize(args.out) / 1e6:.2f} MB; "
          f"episode returns mean {returns.mean():.0f}, median {np.median(returns):.0f}, last 10 "
          f"{returns[-10:].mean():.0f}, best {returns.max():.0f}, worst {returns.min():.0f}")


if __name__ == "__main__":
    sys.exit(main())
