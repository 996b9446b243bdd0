"""MuJoCo cases at a reduced budget (issue 18; not CI): the RL Zoo's SAC / TD3 hyperparameters
on HalfCheetah-v5 and Hopper-v5, trained for `--timesteps` env steps (default 100k, a tenth
of the Zoo's 1M), scored by 10 greedy episodes, beside SB3's published figures.

    pip install 'mujoco>=2.3.3'
    python benchmarks/mujoco_bench.py                                    # every case, 100k steps, seed 0
    python benchmarks/mujoco_bench.py --cases sac-halfcheetah td3-hopper --timesteps 30000

The cases are `benchmarks/zoo.py`'s (`CASES`, its translation of the Zoo's keys, its
`run_case` for training and greedy scoring); their YAMLs are `benchmarks/zoo_cases/
{halfcheetah,hopper}-*.yaml`. SB3's published scores (the Zoo's benchmark.md) are final
scores after 1M steps on the -v3 envs; the Zoo publishes no score at a smaller step count, so
the "SB3 at these steps" column says unknown unless `AT_STEPS` has a figure.

Not named `mujoco.py`: run as a script, this folder comes first on `sys.path`, and a
`mujoco.py` here would be imported in place of the MuJoCo package (by this script and by
`benchmarks/zoo.py` alike).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402  (benchmarks/zoo.py)

# case -> (SB3's published final score, the step count it was reached at, where it comes from)
PUBLISHED: Dict[str, Tuple[float, int, str]] = {
    "sac-halfcheetah": (9535.5, 1_000_000, "Zoo benchmark.md, HalfCheetah-v3"),
    "sac-hopper": (2325.5, 1_000_000, "Zoo benchmark.md, Hopper-v3"),
    "td3-halfcheetah": (9655.7, 1_000_000, "Zoo benchmark.md, HalfCheetah-v3"),
    "td3-hopper": (3606.4, 1_000_000, "Zoo benchmark.md, Hopper-v3"),
}
# (case, env steps) -> SB3's score at that step count, where one is published.
AT_STEPS: Dict[Tuple[str, int], float] = {}


def table(rows: List[dict], published: Dict[str, Tuple[float, int, str]],
          at_steps: Dict[Tuple[str, int], float], reference: str = "SB3") -> str:
    """One line per case: steps, the greedy score per seed and their mean, wall time, and the
    published figures (at these steps where known, and the final one)."""
    head = ["case", "env steps", "greedy score (seed: score)", "mean", "wall s", f"{reference} at these steps",
            f"{reference} final"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == name]
        steps = max(r["steps"] for r in mine)
        at = at_steps.get((name, steps))
        final = published.get(name)
        cells = [name, str(steps), ", ".join(f"{r['seed']}: {r['score']:.1f}" for r in mine),
                 f"{statistics.mean(r['score'] for r in mine):.1f}",
                 ", ".join(f"{r['wall_s']:.0f}" for r in mine),
                 "unknown" if at is None else f"{at:g}",
                 "unknown" if final is None else f"{final[0]:g} after {final[1]:,} steps ({final[2]})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None, *, suite: Dict[str, Tuple[float, int, str]] = PUBLISHED,
         at_steps: Dict[Tuple[str, int], float] = AT_STEPS, default_timesteps: int = 100_000,
         reference: str = "SB3") -> int:
    """Trains and scores the chosen cases of `suite`; prints (and with `--out` writes) the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=sorted(suite), help=f"among {sorted(suite)}")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--timesteps", type=int, default=default_timesteps, help="env steps per run")
    parser.add_argument("--episodes", type=int, default=10, help="greedy evaluation episodes per run")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", default=None, help="also write the Markdown table to this file")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(suite) | set(args.cases) - set(zoo.CASES))
    if unknown:
        parser.error(f"--cases {unknown} unknown; choose among {sorted(set(suite) & set(zoo.CASES))}")
    import torch

    torch.set_num_threads(args.threads)
    rows = zoo.run_cases(args.cases, args.seeds, args.episodes, args.timesteps)
    text = table(rows, suite, at_steps, reference)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
