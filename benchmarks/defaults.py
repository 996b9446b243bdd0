"""Defaults that learn: every algorithm at its own defaults on a small env, over seeds.

    python benchmarks/defaults.py                          # every case, seeds 3 4 5
    python benchmarks/defaults.py --cases PPO SAC --seeds 3..5 --out defaults.md
    python benchmarks/defaults.py --list

A case is an algorithm, an env, a target return and a budget of env steps. Its config holds
nothing but the seed and what the env or this machine needs (each such key is listed with
its reason in the table): an offline learner needs its data, a memory env a recurrent model,
a 2-core machine fewer than APEX's 32 workers. Each seed runs as a user would run it, through
`rlfleet train -f` on a generated one-experiment file (benchmarks/seeds.py runs and judges
it), so the reported return is the one the CLI prints and a seed that reaches the target
after the budget does not count.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds import SeedRun, parse_seeds, run_seed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tuned_examples"
OFFLINE = "offline: the data to learn from, and evaluation episodes in the env for the return"


def offline(data: str, **needs: Any) -> Dict[str, Any]:
    """An offline learner's keys: its data (a file under tuned_examples/), and evaluation
    episodes in the env, where its returns come from."""
    return {"input": str(DATA / data), "evaluation_config": {"input": "sampler"},
            "input_evaluation": ["simulation"], **needs}


@dataclass
class Case:
    """One algorithm at its defaults: `needs` holds the only keys set, each with its reason."""

    name: str
    run: str
    env: str
    target: float
    budget: int
    needs: Dict[str, Any] = field(default_factory=dict)
    why: str = ""

    def experiment(self, seed: int) -> Dict[str, Any]:
        return {self.name: {"run": self.run, "env": self.env,
                            "stop": {"episode_reward_mean": self.target, "timesteps_total": self.budget},
                            "config": {"seed": seed, **self.needs}}}


TWO_CORES = "this machine has 2 cores; the default asks for 32 workers"
CASES: List[Case] = [
    Case("PPO", "PPO", "CartPole-v1", 150, 300_000),
    Case("PG", "PG", "CartPole-v1", 150, 300_000),
    Case("A2C", "A2C", "CartPole-v1", 150, 500_000),
    Case("A3C", "A3C", "CartPole-v1", 150, 500_000),
    Case("APPO", "APPO", "CartPole-v1", 150, 500_000),
    Case("IMPALA", "IMPALA", "CartPole-v1", 150, 500_000),
    Case("DDPPO", "DDPPO", "CartPole-v1", 150, 500_000),
    Case("DQN", "DQN", "CartPole-v1", 150, 100_000),
    Case("SimpleQ", "SimpleQ", "CartPole-v1", 150, 100_000),
    Case("APEX", "APEX", "CartPole-v1", 150, 500_000, {"num_workers": 2}, TWO_CORES),
    Case("R2D2", "R2D2", "CartPole-v1", 150, 200_000),
    Case("APEX_R2D2", "APEX_R2D2", "CartPole-v1", 150, 200_000),
    Case("ES", "ES", "CartPole-v1", 150, 1_000_000),
    Case("ARS", "ARS", "CartPole-v1", 150, 1_000_000),
    Case("SAC", "SAC", "Pendulum-v1", -400, 50_000),
    Case("TD3", "TD3", "Pendulum-v1", -400, 50_000),
    Case("DDPG", "DDPG", "Pendulum-v1", -400, 50_000),
    Case("APEX_DDPG", "APEX_DDPG", "Pendulum-v1", -400, 300_000, {"num_workers": 2}, TWO_CORES),
    Case("RNNSAC", "RNNSAC", "rlfleet.env.examples.memory:StatelessPendulum", -400, 60_000,
         {"model": {"max_seq_len": 20}, "Q_model": {"lstm_cell_size": 64}, "policy_model": {"lstm_cell_size": 64}},
         "the env hides the velocity: a memory (the recurrent models' size and sequence length)"),
    Case("BC", "BC", "CartPole-v1", 150, 100_000,
         offline("bc/data/cartpole-expert.json"), OFFLINE),
    Case("MARWIL", "MARWIL", "CartPole-v1", 150, 100_000,
         offline("marwil/data/cartpole-mixed.json"), OFFLINE),
    Case("CQL", "CQL", "Pendulum-v1", -700, 100_000,
         offline("cql/data/pendulum-sac.json"), OFFLINE),
    Case("CRR", "CRR", "CartPole-v1", 150, 100_000,
         offline("marwil/data/cartpole-mixed.json"), OFFLINE),
    Case("IQL", "IQL", "CartPole-v1", 150, 100_000,
         offline("marwil/data/cartpole-mixed.json"), OFFLINE),
    Case("DT", "DT", "CartPole-v1", 150, 200_000,
         offline("dt/data/cartpole-mixed.json", target_return=500),
         OFFLINE + "; the return DT conditions on, which has no default: CartPole-v1's maximum"),
    # Its exploration decays over 250k steps (epsilon 1 to 0.01 after a 20k warm-up): the training
    # episodes' returns, which the table judges, reach the greedy policy's only after that.
    Case("SlateQ", "SlateQ", "rlfleet.env.examples.interest_evolution:InterestEvolutionEnv", 7.5, 400_000),
    Case("AlphaZero", "AlphaZero", "rlfleet.env.examples.sparse_corridor:SparseCorridorEnv", 12, 50_000),
    Case("MAML", "MAML", "rlfleet.env.examples.point_navigation:PointNavigationEnv", -17.5, 500_000),
    Case("MBMPO", "MBMPO", "rlfleet.env.examples.pendulum_with_reward:PendulumWithReward", -950, 20_000),
    Case("QMIX", "QMIX", "rlfleet.env.examples.team_envs:two_step_team", 7.5, 20_000),
    Case("MADDPG", "MADDPG", "rlfleet.env.examples.maddpg_envs:MatchTargetEnv", 6.0, 60_000),
    Case("BanditLinTS", "BanditLinTS", "rlfleet.env.examples.bandits:LinearContextualBandit", 1.7, 10_000),
    Case("BanditLinUCB", "BanditLinUCB", "rlfleet.env.examples.bandits:LinearContextualBandit", 1.7, 10_000),
]


def run_case(case: Case, seeds: List[int], timeout_s: float) -> List[SeedRun]:
    runs = []
    with tempfile.TemporaryDirectory(prefix=f"defaults_{case.name}_") as folder:
        for seed in seeds:
            path = Path(folder) / f"{case.name}-{seed}.yaml"
            path.write_text(yaml.safe_dump(case.experiment(seed), sort_keys=False))
            run = run_seed(path, seed, timeout_s)
            print(f"  {case.name} seed {seed}: {'reached' if run.reached else 'missed'} (best {run.best}, "
                  f"{run.steps} steps, {run.wall_s:.0f} s wall, exit {run.exit_code})", flush=True)
            runs.append(run)
    return runs


def row(case: Case, runs: List[SeedRun]) -> str:
    hits = [r for r in runs if r.reached]
    steps = [r.steps for r in hits if r.steps is not None]
    median = f"{statistics.median(steps):,.0f} ({min(steps):,}-{max(steps):,})" if steps else "-"
    best = ", ".join("-" if r.best is None else f"{r.best:.1f}" for r in runs)
    needs = ", ".join(f"`{k}`" for k in case.needs if k != "input_evaluation") or "none"
    if case.why:
        needs += f" ({case.why})"
    return (f"| {case.run} | {case.env.split(':')[-1]} | {case.target:g} | {case.budget:,} | {needs} | "
            f"{len(hits)}/{len(runs)} | {median} | {best} |")


HEADER = ("| algorithm | env | target | budget (env steps) | keys set besides the seed | seeds reached | "
          "median steps (range) | best per seed |\n| --- | --- | --- | --- | --- | --- | --- | --- |")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", help="case names (default: all; see --list)")
    parser.add_argument("--seeds", nargs="+", default=["3..5"], help="seeds and inclusive ranges (default 3..5)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it is killed")
    parser.add_argument("--out", help="also append each case's table row to this Markdown file")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    by_name = {case.name: case for case in CASES}
    if args.list:
        for case in CASES:
            print(f"{case.name}: {case.env}, {case.target:g} within {case.budget:,} steps")
        return 0
    unknown = sorted(set(args.cases or []) - set(by_name))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {sorted(by_name)}")
    seeds = parse_seeds(args.seeds)
    print(HEADER)
    for name in args.cases or list(by_name):
        line = row(by_name[name], run_case(by_name[name], seeds, args.timeout))
        print(line, flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
