"""Writes the offline dataset of tuned_examples/crr/ and tuned_examples/iql/: Pendulum-v1
episodes of mixed quality, half from the scripted expert, half from random torques
(`rlfleet.offline.pendulum_dataset.write_mixed_pendulum_dataset`, seed 0, the noise-free
expert: `expert_noise=0`, as the committed file was written before the noise was added), one episode per
line with every column LZ4-compressed (as benchmarks/make_cql_data.py does) so that the
committed file stays small (485 KiB instead of 1.7 MiB).

    .venv/bin/python benchmarks/make_offline_pendulum_data.py          # the committed file
"""
from __future__ import annotations

import argparse
import os
import tempfile

from make_cql_data import regroup  # the same one-episode-per-line, compressed re-encoding

from rlfleet.offline.pendulum_dataset import write_mixed_pendulum_dataset

DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "tuned_examples", "crr", "data", "pendulum-mixed.json")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        info = write_mixed_pendulum_dataset(os.path.join(folder, "out"), episodes=args.episodes, expert_fraction=0.5,
                                            seed=args.seed, expert_noise=0.0)
        data = regroup(folder, args.out, rows_per_line=200)
    print(f"{args.out}: {data.count} rows; expert episodes {info['expert_return']:.1f}, random "
          f"{info['random_return']:.1f}; {os.path.getsize(args.out) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
