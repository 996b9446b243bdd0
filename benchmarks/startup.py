"""Start-up time and peak memory: a fresh process from its start to the first `train()`
result of PPO on CartPole-v1 (local, `tuned_examples/ppo/cartpole-ppo.yaml`'s config), and
`import torch` alone for scale.

    python benchmarks/startup.py                 # 5 runs of each, alternating
    python benchmarks/startup.py --runs 7 --src /path/to/other/checkout/src   # compare a checkout

Each run is a new interpreter; its wall time is measured by this parent (interpreter start
included), its CPU time (user + system) and peak RSS (`ru_maxrss`) by `getrusage` of the
child. With `--src`, the same runs also use that source tree (PYTHONPATH) and the two
alternate, so both see the same machine load. Prints each measure's median over the runs
and its spread (min-max), and the load average (the machine is shared: compare in one run).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Optional

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

FIRST_TRAIN = r"""
import sys, yaml
from rlfleet.algorithms.ppo import PPOTrainer
config = yaml.safe_load(open(sys.argv[1]))["cartpole-ppo"]["config"]
trainer = PPOTrainer(env="CartPole-v1", config=config)
result = trainer.train()
heavy = [m for m in ("torch._dynamo", "sympy", "ray") if m in sys.modules]
print("HEAVY", ",".join(heavy) or "-")
"""
IMPORT_TORCH = "import torch"


def _measure(code: str, src: Optional[str]) -> Dict[str, float]:
    """One run in a wrapper process that reports its child's peak RSS (RUSAGE_CHILDREN's
    maxrss is a running maximum over all children, so each run gets its own parent)."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-c', sys.argv[1], sys.argv[2]], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "sys.stderr.write(p.stderr[-3000:] if p.returncode else '')\n"
        "print('RUN', wall, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024, p.returncode,"
        " [l[6:] for l in p.stdout.splitlines() if l.startswith('HEAVY ')])\n"
    )
    env = dict(os.environ, RLFLEET_RESULTS_DIR=os.path.join(os.environ.get("TMPDIR", "/tmp"), "rlfleet-startup"))
    if src:
        env["PYTHONPATH"] = src
    proc = subprocess.run([sys.executable, "-c", wrapper, code,
                           os.path.join(ROOT, "tuned_examples/ppo/cartpole-ppo.yaml")],
                          capture_output=True, text=True, env=env)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RUN ")]
    if not line:
        raise RuntimeError(proc.stderr[-3000:])
    parts = line[0].split(" ", 5)
    if int(parts[4]) != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return {"wall_s": float(parts[1]), "cpu_s": float(parts[2]), "peak_rss_mb": float(parts[3]),
            "heavy": parts[5].strip("[]'\n ") or "-"}


def _summary(values: List[float]) -> str:
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--src", default=None, help="another checkout's src/ to measure alternately")
    args = parser.parse_args()
    trees = {"this": None} if args.src is None else {"this": None, "other": args.src}
    cases = {"first train()": FIRST_TRAIN, "import torch": IMPORT_TORCH}
    results: Dict[tuple, List[Dict[str, float]]] = {}
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for i in range(args.runs):
        order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
        for name, src in order:
            for case, code in cases.items():
                results.setdefault((name, case), []).append(_measure(code, src))
    print(f"{'tree':6s} {'case':14s} {'wall s, median (min-max)':>26s} {'CPU s':>22s} {'peak RSS MB':>24s}  heavy")
    for (name, case), runs in results.items():
        print(f"{name:6s} {case:14s} {_summary([r['wall_s'] for r in runs]):>26s} "
              f"{_summary([r['cpu_s'] for r in runs]):>22s} {_summary([r['peak_rss_mb'] for r in runs]):>24s}  "
              f"{runs[-1]['heavy']}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
