"""The reference's (RLlib 1.x) tuned examples, run unchanged through `rlfleet train -f`.

    python benchmarks/reference_1x.py                       # every file in tuned_examples/reference_1x/
    python benchmarks/reference_1x.py --cases cartpole-ppo cartpole-dqn --out reference_1x.md
    python benchmarks/reference_1x.py --list

Each case is one file of `tuned_examples/reference_1x/` (the reference's settings, `framework:
tf` and all; see its README). It runs as a user would run it, `rlfleet train -f FILE`, in a
subprocess, with the file's own stop criteria (the stop reward, and the budget:
`timesteps_total`, or `time_total_s` where the reference gave wall time). The table says per
case whether the run reached the stop reward, whether it did so within the budget, the env
steps and the wall time; a case the CLI refused shows its exit code and last message.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT / "tuned_examples" / "reference_1x"
BUDGET_KEYS = ("timesteps_total", "time_total_s")


@dataclass
class Outcome:
    """One case's run: what the CLI said and what its last result held."""

    case: str
    exit_code: int
    target: float
    budget_key: str
    budget: float
    reward: Optional[float]
    timesteps: Optional[int]
    train_s: Optional[float]
    wall_s: float
    message: str

    @property
    def reached(self) -> bool:
        return self.reward is not None and self.reward >= self.target

    @property
    def within_budget(self) -> bool:
        used = self.timesteps if self.budget_key == "timesteps_total" else self.train_s
        return self.reached and used is not None and used <= self.budget


def case_files() -> Dict[str, Path]:
    """Case name (the file's stem) -> file, sorted."""
    return {p.stem: p for p in sorted(CASES_DIR.glob("*.yaml"))}


def _stop(path: Path) -> Dict[str, float]:
    (experiment,) = yaml.safe_load(path.read_text()).values()
    return dict(experiment["stop"])


def _last_result(local_dir: str) -> Optional[Dict[str, Any]]:
    files = glob.glob(os.path.join(local_dir, "*", "result.json"))
    if not files:
        return None
    lines = [line for line in Path(files[0]).read_text().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def run_case(name: str, path: Path, timeout_s: float) -> Outcome:
    """Runs `rlfleet train -f path` in a subprocess and reads its last result."""
    stop = _stop(path)
    budget_key = next(k for k in BUDGET_KEYS if k in stop)
    with tempfile.TemporaryDirectory(prefix=f"reference_1x_{name}_") as local_dir:
        command = [sys.executable, "-m", "rlfleet.cli", "train", "-q", "-f", str(path), "--local-dir", local_dir]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as e:
            code, output = 124, f"timed out after {timeout_s:.0f} s; {(e.stdout or b'')[-200:]!r}"
        wall = time.perf_counter() - start
        result = _last_result(local_dir) or {}
    last_line = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "")
    return Outcome(case=name, exit_code=code, target=float(stop["episode_reward_mean"]), budget_key=budget_key,
                   budget=float(stop[budget_key]), reward=result.get("episode_reward_mean"),
                   timesteps=result.get("timesteps_total"), train_s=result.get("time_total_s"), wall_s=wall,
                   message=last_line[:160])


def table(outcomes: List[Outcome]) -> str:
    """A Markdown table of the outcomes."""
    rows = ["| case | exit | stop reward | reached | budget | within budget | last reward | timesteps | wall s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for o in outcomes:
        reward = "-" if o.reward is None else f"{o.reward:.2f}"
        rows.append(f"| {o.case} | {o.exit_code} | {o.target:g} | {'yes' if o.reached else 'no'} | "
                    f"{o.budget_key} {o.budget:g} | {'yes' if o.within_budget else 'no'} | {reward} | "
                    f"{o.timesteps if o.timesteps is not None else '-'} | {o.wall_s:.0f} |")
    failed = [o for o in outcomes if o.exit_code != 0]
    if failed:
        rows.append("")
        rows += [f"- {o.case}: exit {o.exit_code}: {o.message}" for o in failed]
    return "\n".join(rows) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", help="case names (file stems); default: all")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per case (default 1800)")
    parser.add_argument("--out", help="also write the table to this Markdown file")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    files = case_files()
    if args.list:
        print("\n".join(files))
        return 0
    unknown = sorted(set(args.cases or []) - set(files))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {sorted(files)}")
    outcomes = []
    for name in args.cases or list(files):
        outcome = run_case(name, files[name], args.timeout)
        print(f"{name}: exit {outcome.exit_code}, reward {outcome.reward}, steps {outcome.timesteps}, "
              f"{outcome.wall_s:.0f} s", flush=True)
        outcomes.append(outcome)
    text = table(outcomes)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if all(o.within_budget for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
