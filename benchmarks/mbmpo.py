"""MB-MPO on Pendulum-v1 with a reward function: how many real env steps to reach -300.

Runs tuned_examples/mbmpo/pendulum-mbmpo.yaml per seed until its stop (episode_reward_mean
-300, over the iteration's own real episodes, or 20k real env steps) and prints one line per
iteration (real steps, return of the iteration's episodes, imagined returns before / after
adaptation, model validation loss, seconds), then per seed the real steps at which -300 was
first reached (or the best return seen).

Usage: python benchmarks/mbmpo.py [--seeds 0] [--max-steps 20000] [--threads 1] [--override JSON]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rlfleet.registry import get_trainer_class  # noqa: E402

EXAMPLE = ROOT / "tuned_examples" / "mbmpo" / "pendulum-mbmpo.yaml"


def run(spec: dict, seed: int, max_steps: int) -> dict:
    config = dict(spec["config"], seed=seed)
    target = float(spec["stop"]["episode_reward_mean"])
    reached, best = None, float("-inf")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as logdir:
        trainer = get_trainer_class(spec["run"])(config=config, env=spec["env"], logdir=logdir)
        try:
            while True:
                r = trainer.train()
                stats = r["info"]["learner"]["default_policy"]["learner_stats"]
                ret, steps = r["episode_reward_mean"], r["timesteps_total"]
                best = max(best, ret)
                print(f"seed {seed} iter {r['training_iteration']:3d} steps {steps:6d} return {ret:8.1f} "
                      f"imagined {r.get('imagined_reward_mean_adapt_0', float('nan')):8.1f} -> "
                      f"{r.get('imagined_reward_mean_adapt_1', float('nan')):8.1f} "
                      f"model_loss {stats['model_valid_loss']:.4f} t {time.perf_counter() - start:6.0f}s", flush=True)
                if ret >= target and reached is None:
                    reached = steps
                    break
                if steps >= max_steps:
                    break
        finally:
            trainer.stop()
    return {"seed": seed, "reached_at": reached, "best": best, "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-steps", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
    parser.add_argument("--override", default="{}", help="JSON merged over the tuned example's config")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    spec = next(iter(yaml.safe_load(EXAMPLE.read_text()).values()))
    spec["config"].update(json.loads(args.override))
    for seed in args.seeds:
        out = run(spec, seed, args.max_steps)
        verdict = f"-300 at {out['reached_at']} real steps" if out["reached_at"] else f"best {out['best']:.1f}"
        print(f"seed {seed}: {verdict} ({out['seconds']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
