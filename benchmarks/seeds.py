"""A seed sweep: one tuned file (or every tuned file of an algorithm) over many seeds.

    python benchmarks/seeds.py tuned_examples/ppo/cartpole-ppo.yaml --seeds 0..9
    python benchmarks/seeds.py PPO --seeds 3 4 5 --parallel 2 --out ppo_seeds.md

Each seed is a fresh subprocess, `rlfleet train -f FILE --config '{"seed": N}'`, as a user
would run it, so the file's own stop criteria apply: the stop reward (its one non-budget
stop key, e.g. `episode_reward_mean`) and its budget (`timesteps_total`, `time_total_s`
and/or `training_iteration`). A tuned file is tuned on its own seed; a sweep shows whether
it learns on others. Per seed the table says whether the run reached the stop reward within
the budget, the env steps, the trainer's time and the process's wall time; a summary line per
file gives the fraction that reached and the median steps of those that did.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
TUNED = ROOT / "tuned_examples"
# Stop keys that bound a run rather than say it succeeded.
BUDGET_KEYS = ("timesteps_total", "time_total_s", "training_iteration")
# Where a budget key's use is read from in a result (the same names).
_USED = {"timesteps_total": "timesteps_total", "time_total_s": "time_total_s",
         "training_iteration": "training_iteration"}


def parse_seeds(tokens: List[str]) -> List[int]:
    """`["0..3", "7"]` -> `[0, 1, 2, 3, 7]` (ranges inclusive, order kept, duplicates dropped).

    Raises:
        ValueError: a token that is neither an integer nor `A..B` with A <= B.
    """
    seeds: List[int] = []
    for token in tokens:
        try:
            if ".." in token:
                first, last = (int(part) for part in token.split("..", 1))
                if first > last:
                    raise ValueError
                seeds += range(first, last + 1)
            else:
                seeds.append(int(token))
        except ValueError:
            raise ValueError(f"bad seed {token!r}: give integers or inclusive ranges like 0..9") from None
    return list(dict.fromkeys(seeds))


def tuned_files(algo_or_file: str) -> List[Path]:
    """The YAML file given, or every `*.yaml` under `tuned_examples/<algo>/` (any case).

    Raises:
        ValueError: neither an existing file nor a folder of tuned examples.
    """
    path = Path(algo_or_file)
    if path.is_file():
        return [path]
    folder = TUNED / algo_or_file.lower()
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not files:
        known = sorted(p.name for p in TUNED.iterdir() if p.is_dir())
        raise ValueError(f"{algo_or_file!r} is neither a YAML file nor an algorithm with tuned examples; "
                         f"give a file path or one of {known}")
    return files


def stop_criteria(path: Path) -> Tuple[str, float, Dict[str, float]]:
    """`(target key, target value, {budget key: budget})` of the file's one experiment.

    Raises:
        ValueError: several experiments, or no (or several) stop reward keys.
    """
    spec = yaml.safe_load(path.read_text())
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f"{path}: a seed sweep needs a file with exactly one experiment; split the file")
    (experiment,) = spec.values()
    stop: Mapping[str, Any] = experiment.get("stop") or {}
    targets = [k for k in stop if k not in BUDGET_KEYS]
    if len(targets) != 1:
        raise ValueError(f"{path}: its 'stop' needs exactly one reward key (besides the budget keys "
                         f"{list(BUDGET_KEYS)}), got {sorted(stop)}")
    budgets = {k: float(stop[k]) for k in BUDGET_KEYS if k in stop}
    return targets[0], float(stop[targets[0]]), budgets


def _metric(result: Mapping[str, Any], key: str) -> Optional[float]:
    # Stop keys may name nested metrics with "/" (e.g. "evaluation/episode_reward_mean").
    value: Any = result
    for part in key.split("/"):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return None if value is None else float(value)


def _results(local_dir: str) -> List[Dict[str, Any]]:
    files = glob.glob(os.path.join(local_dir, "*", "result.json"))
    if not files:
        return []
    return [json.loads(line) for line in Path(files[0]).read_text().splitlines() if line.strip()]


@dataclass
class SeedRun:
    """One seed's run of one file."""

    file: str
    seed: int
    exit_code: int
    reached: bool  # the stop reward, within every budget
    best: Optional[float]  # the best value of the stop metric seen
    steps: Optional[int]  # env steps when it reached (else at the end)
    train_s: Optional[float]  # the trainer's time_total_s at that point
    wall_s: float  # the subprocess's wall time
    message: str


def judge(results: List[Dict[str, Any]], target_key: str, target: float,
          budgets: Mapping[str, float]) -> Tuple[bool, Optional[float], Optional[Dict[str, Any]]]:
    """`(reached within budget, best metric, the deciding result)`: the first result at the
    target, if its use of every budget is within the budget; else the last result."""
    values = [_metric(r, target_key) for r in results]
    finite = [v for v in values if v is not None and v == v]
    best = max(finite) if finite else None
    for result, value in zip(results, values):
        if value is not None and value >= target:
            within = all((_metric(result, _USED[k]) or 0.0) <= budget for k, budget in budgets.items())
            return within, best, result
    return False, best, (results[-1] if results else None)


def run_seed(path: Path, seed: int, timeout_s: float) -> SeedRun:
    """`rlfleet train -f path --config '{"seed": seed}'` in a subprocess, judged on its results."""
    target_key, target, budgets = stop_criteria(path)
    with tempfile.TemporaryDirectory(prefix=f"seeds_{path.stem}_{seed}_") as local_dir:
        command = [sys.executable, "-m", "rlfleet.cli", "train", "-q", "-f", str(path), "--local-dir", local_dir,
                   "--config", json.dumps({"seed": seed})]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            code, output = 124, f"killed after the sweep's --timeout of {timeout_s:.0f} s"
        wall = time.perf_counter() - start
        results = _results(local_dir)
    reached, best, result = judge(results, target_key, target, budgets)
    result = result or {}
    last_line = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "")
    return SeedRun(file=str(path), seed=seed, exit_code=code, reached=reached, best=best,
                   steps=result.get("timesteps_total"), train_s=result.get("time_total_s"), wall_s=wall,
                   message=last_line[:160])


def summary(runs: List[SeedRun]) -> str:
    """`"3/5 reached; median steps 12000 (range 9000-15000)"` over one file's runs."""
    hits = [r for r in runs if r.reached]
    line = f"{len(hits)}/{len(runs)} reached"
    steps = [r.steps for r in hits if r.steps is not None]
    if steps:
        line += f"; median steps {statistics.median(steps):.0f} (range {min(steps)}-{max(steps)})"
    return line


def table(path: Path, runs: List[SeedRun]) -> str:
    """One file's Markdown table and summary line."""
    target_key, target, budgets = stop_criteria(path)
    budget = ", ".join(f"{k} {v:g}" for k, v in budgets.items()) or "none"
    rows = [f"{path} (stop at {target_key} >= {target:g}; budget {budget})", "",
            "| seed | exit | reached | best | steps | train s | wall s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        best = "-" if r.best is None else f"{r.best:.2f}"
        train = "-" if r.train_s is None else f"{r.train_s:.0f}"
        rows.append(f"| {r.seed} | {r.exit_code} | {'yes' if r.reached else 'no'} | {best} | "
                    f"{r.steps if r.steps is not None else '-'} | {train} | {r.wall_s:.0f} |")
    rows += ["", summary(runs)]
    rows += [f"- seed {r.seed}: exit {r.exit_code}: {r.message}" for r in runs if r.exit_code != 0]
    return "\n".join(rows) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("algo_or_file", help="a tuned YAML file, or an algorithm (all of tuned_examples/<algo>/)")
    parser.add_argument("--seeds", nargs="+", default=["0..4"], help="seeds and inclusive ranges (default 0..4)")
    parser.add_argument("--parallel", type=int, default=1, help="seeds run at once (default 1; time budgets "
                        "measure wall time, so parallel runs on few cores reach less)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it is killed")
    parser.add_argument("--out", help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
        files = tuned_files(args.algo_or_file)
        for path in files:
            stop_criteria(path)
    except ValueError as exc:
        parser.error(str(exc))
    if args.parallel < 1:
        parser.error(f"--parallel must be at least 1, got {args.parallel}")
    tables, all_reached = [], True
    for path in files:
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(run_seed, path, seed, args.timeout) for seed in seeds]
            runs = []
            for future in futures:
                run = future.result()
                print(f"{path.name} seed {run.seed}: {'reached' if run.reached else 'missed'}, best {run.best}, "
                      f"steps {run.steps}, {run.wall_s:.0f} s", flush=True)
                runs.append(run)
        all_reached &= all(r.reached for r in runs)
        tables.append(table(path, runs))
    text = "\n".join(tables)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if all_reached else 1


if __name__ == "__main__":
    sys.exit(main())
