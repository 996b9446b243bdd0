"""SlateQ against the greedy-on-immediate-engagement slate policy on rlfleet's interest-evolution
recommender (rlfleet.env.examples.interest_evolution), over whole sessions.

The baseline, `InterestEvolutionEnv.greedy_slate`, is an oracle myopic recommender: it knows the
user's true choice model and shows the slate with the highest click probability, found by
enumerating every slate. It is optimal for one step, not for a session: the most clickable
documents are the low-quality ones, whose clicks drain the session budget (and sour the user's
interest), so sessions end early. SlateQ learns its choice model and long-run item values from
interaction alone.

Each seed trains SlateQ with tuned_examples/slateq/interest-evolution-slateq.yaml's config (its
seed replaced) for `--timesteps` env steps, then both policies play the same `--episodes`
sessions (episode i of seed s starts from `reset(seed=10_000 * (s + 1) + i)`: the same user and
first candidates for both), SlateQ without exploration. The must-show: SlateQ's mean session
engagement beats the baseline's by at least `--margin` (relative) on every seed.

    python benchmarks/slateq.py --seeds 0 1 2
    python benchmarks/slateq.py --seeds 0 --override '{"slateq_strategy": "MYOP"}'

Measured figures are in docs/benchmarks.md ("SlateQ: long-run engagement against a greedy recommender").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from rlfleet.algorithms.slateq import SlateQTrainer  # noqa: E402
from rlfleet.env.examples.interest_evolution import play_sessions  # noqa: E402

TUNED_EXAMPLE = ROOT / "tuned_examples" / "slateq" / "interest-evolution-slateq.yaml"


def run_seed(seed: int, experiment: Dict, timesteps: int, episodes: int, logdir: str) -> Dict:
    config = dict(experiment["config"], seed=seed, log_sys_usage=False)
    trainer = SlateQTrainer(env=experiment["env"], config=config, logdir=logdir)
    start = time.perf_counter()
    while trainer.train()["timesteps_total"] < timesteps:
        pass
    train_s = time.perf_counter() - start
    env_config = config.get("env_config", {})
    first = 10_000 * (seed + 1)
    slateq, slateq_len = play_sessions(lambda env, obs: trainer.compute_single_action(obs, explore=False),
                                       env_config, first, episodes)
    greedy, greedy_len = play_sessions(lambda env, obs: env.greedy_slate(), env_config, first, episodes)
    trainer.stop()
    se = lambda x: float(np.std(x) / np.sqrt(len(x)))  # noqa: E731
    return {"seed": seed, "slateq": float(slateq.mean()), "greedy": float(greedy.mean()), "slateq_se": se(slateq),
            "greedy_se": se(greedy), "slateq_len": float(slateq_len.mean()), "greedy_len": float(greedy_len.mean()),
            "train_s": train_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timesteps", type=int, default=20_000, help="SlateQ's training env steps per seed")
    parser.add_argument("--episodes", type=int, default=500, help="evaluation sessions per policy and seed")
    parser.add_argument("--override", default="{}", help="JSON overrides of the tuned example's config, e.g. "
                        "'{\"slateq_strategy\": \"MYOP\"}' (immediate engagement only: the learned myopic recommender)")
    parser.add_argument("--margin", type=float, default=0.5,
                        help="the relative margin SlateQ must beat the greedy baseline by on every seed")
    args = parser.parse_args()
    experiment = next(iter(yaml.safe_load(TUNED_EXAMPLE.read_text()).values()))
    experiment["config"].update(json.loads(args.override))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            rows.append(run_seed(seed, experiment, args.timesteps, args.episodes, os.path.join(tmp, str(seed))))
            r = rows[-1]
            print(f"# seed {seed}: SlateQ {r['slateq']:.2f}, greedy {r['greedy']:.2f} ({r['train_s']:.0f} s)",
                  flush=True)
    print(f"\n{args.episodes} sessions per policy and seed, SlateQ trained {args.timesteps} env steps\n")
    print("| seed | SlateQ engagement | greedy engagement | margin (SlateQ / greedy - 1) | session length SlateQ "
          "/ greedy | train s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        r["margin"] = r["slateq"] / r["greedy"] - 1.0
        print(f"| {r['seed']} | {r['slateq']:.2f} ± {r['slateq_se']:.2f} | {r['greedy']:.2f} ± {r['greedy_se']:.2f} "
              f"| {r['margin']:+.0%} | {r['slateq_len']:.1f} / {r['greedy_len']:.1f} | {r['train_s']:.0f} |")
    med = {k: statistics.median(r[k] for r in rows) for k in ("slateq", "greedy", "margin", "slateq_len", "greedy_len")}
    print(f"| median | {med['slateq']:.2f} | {med['greedy']:.2f} | {med['margin']:+.0%} | "
          f"{med['slateq_len']:.1f} / {med['greedy_len']:.1f} | |")
    wins = sum(r["margin"] >= args.margin for r in rows)
    print(f"\nSlateQ beats greedy by >= {args.margin:.0%} on {wins} of {len(rows)} seeds")
    sys.exit(0 if wins == len(rows) else 1)


if __name__ == "__main__":
    main()
