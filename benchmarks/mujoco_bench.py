"""MuJoCo cases at a reduced budget (issue 18; not CI): the RL Zoo's SAC / TD3 hyperparameters
on HalfCheetah-v5 and Hopper-v5, trained for `--timesteps` env steps (default 100k, a tenth
of the Zoo's 1M), scored by 10 greedy episodes, beside SB3's published figures.

    pip install 'mujoco>=2.3.3'
    python benchmarks/mujoco_bench.py                                    # every case, 100k steps, seed 0
    python benchmarks/mujoco_bench.py --cases sac-halfcheetah td3-hopper --timesteps 30000
    python benchmarks/mujoco_bench.py --sb3 --cases sac-halfcheetah     # SB3 itself, same case and scoring

The cases are `benchmarks/zoo.py`'s (`CASES`, its translation of the Zoo's keys, its
`run_case` for training and greedy scoring); their YAMLs are `benchmarks/zoo_cases/
{halfcheetah,hopper}-*.yaml`. SB3's published scores (the Zoo's benchmark.md) are final
scores after 1M steps on the -v3 envs; the Zoo publishes no score at a smaller step count, so
the "SB3 at these steps" column says unknown unless `AT_STEPS` has a figure.

`--sb3` trains Stable-Baselines3 (`pip install 'rlfleet[bench]'`) on the same cases with
the Zoo's hyperparameters (`SB3_CASES`) for the same steps and scores it the same way (10
greedy episodes from env seeds 10000+i): a same-machine figure at a step count the Zoo does
not publish.

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
# case -> (SB3 class, env id, the Zoo's hyperparameters: hyperparams/sac.yml and td3.yml)
_TD3_ZOO = {"learning_starts": 10_000, "learning_rate": 1e-3, "batch_size": 256, "train_freq": 1,
            "gradient_steps": 1, "policy_kwargs": {"net_arch": [400, 300]}, "noise_std": 0.1}
SB3_CASES: Dict[str, Tuple[str, str, dict]] = {
    "sac-halfcheetah": ("SAC", "HalfCheetah-v5", {"learning_starts": 10_000}),
    "sac-hopper": ("SAC", "Hopper-v5", {"learning_starts": 10_000}),
    "td3-halfcheetah": ("TD3", "HalfCheetah-v5", _TD3_ZOO),
    "td3-hopper": ("TD3", "Hopper-v5", _TD3_ZOO),
}


class _SB3Actor:
    """An SB3 model behind the one method `zoo.greedy_score` calls."""

    def __init__(self, model):
        self.model = model

    def compute_single_action(self, obs, explore: bool = False):
        return self.model.predict(obs, deterministic=not explore)[0]


def run_sb3_case(name: str, seed: int, episodes: int, timesteps: int) -> dict:
    """SB3 on case `name` for `timesteps` steps, scored as `zoo.run_case` scores rlfleet."""
    import time

    import numpy as np
    import stable_baselines3
    from stable_baselines3.common.noise import NormalActionNoise

    algo, env_id, hyper = SB3_CASES[name]
    kwargs = dict(hyper)
    noise_std = kwargs.pop("noise_std", None)
    model_cls = getattr(stable_baselines3, algo)
    model = model_cls("MlpPolicy", env_id, seed=seed, device="cpu", verbose=0, **kwargs)
    if noise_std is not None:
        size = model.action_space.shape[-1]
        model.action_noise = NormalActionNoise(np.zeros(size), noise_std * np.ones(size))
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    wall = time.perf_counter() - start
    returns = zoo.greedy_score(_SB3Actor(model), env_id, episodes)
    return {"case": f"{name} (SB3)", "seed": seed, "score": statistics.mean(returns), "steps": int(model.num_timesteps),
            "wall_s": wall, "returns": returns}


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
    parser.add_argument("--sb3", action="store_true", help="train Stable-Baselines3 instead (SB3_CASES)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(suite) | set(args.cases) - set(zoo.CASES))
    if unknown:
        parser.error(f"--cases {unknown} unknown; choose among {sorted(set(suite) & set(zoo.CASES))}")
    import torch

    torch.set_num_threads(args.threads)
    if args.sb3:
        rows = []
        for name in args.cases:
            for seed in args.seeds:
                rows.append(run_sb3_case(name, seed, args.episodes, args.timesteps))
                print(f"{rows[-1]['case']} seed {seed}: {rows[-1]['score']:.1f} after {rows[-1]['steps']} env steps, "
                      f"{rows[-1]['wall_s']:.0f} s", flush=True)
    else:
        rows = zoo.run_cases(args.cases, args.seeds, args.episodes, args.timesteps)
    text = table(rows, suite, at_steps, reference)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
