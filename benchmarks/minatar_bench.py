"""MinAtar cases at a reduced budget (issue 18; not CI): PPO and DQN with the MinAtar paper's
network on Breakout and Space Invaders, trained for `--timesteps` env steps (default 300k; the
paper trains DQN for 5M frames), scored by 10 greedy episodes.

    pip install minatar
    python benchmarks/minatar_bench.py                                       # every case, seed 0
    python benchmarks/minatar_bench.py --cases ppo-minatar-breakout --timesteps 1000000

The cases are `benchmarks/zoo.py`'s (`CASES`, `run_case`); their YAMLs are
`benchmarks/zoo_cases/minatar-*.yaml`. Young & Tian (2019) publish DQN's returns as
learning curves only (their README's results figure: 30 seeds, 5M frames), so the reference
columns say unknown unless `PUBLISHED` / `AT_STEPS` hold a number read off a table.

Not named `minatar.py`, for the reason `mujoco_bench.py` gives.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mujoco_bench  # noqa: E402  (the runner and table, shared)

# case -> (published final score, at how many steps, where from); none is published as a number.
PUBLISHED: Dict[str, Tuple[float, int, str]] = {}
AT_STEPS: Dict[Tuple[str, int], float] = {}
CASES = ("dqn-minatar-breakout", "dqn-minatar-spaceinvaders", "ppo-minatar-breakout", "ppo-minatar-spaceinvaders")

if __name__ == "__main__":
    sys.exit(mujoco_bench.main(suite={c: PUBLISHED.get(c) for c in CASES}, at_steps=AT_STEPS,
                               default_timesteps=300_000, reference="paper"))
