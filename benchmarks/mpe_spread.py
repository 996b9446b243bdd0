"""One seeded run of a multi-agent tuned example on mpe2 (QMIX / VDN, MADDPG), then its
greedy evaluation: the figures of docs/guides/qmix.md's and maddpg.md's comparisons.

    python benchmarks/mpe_spread.py tuned_examples/qmix/simple-spread-vdn.yaml --seed 1 \
        --set mixer=null --steps 100000 --eval-episodes 50

Both arms of a comparison run the same tuned example; `--set key=JSON` changes one key for
one arm (`mixer=null`: independent Q-learners; `use_local_critic=true`: MADDPG's DDPG
baseline; dotted keys reach into dicts). The tuned example's reward stop is dropped: every
arm trains for exactly `--steps` env steps. Each iteration prints one line (training return
and the learner's Q statistics, to see a run diverge); the last line is the JSON of the
result: `{"yaml", "seed", "set", "steps", "train_return", "greedy_return", "eval_episodes",
"seconds"}`. Run one at a time on a shared machine, under `timeout`.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Dict, List

import yaml


def _set(config: Dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        config = config.setdefault(key, {})
    config[last] = value


def _q_stats(result: Dict[str, Any]) -> str:
    parts = []
    for pid, info in sorted((result.get("info", {}).get("learner") or {}).items()):
        stats = info.get("learner_stats", info)
        picked = {k: float(stats[k]) for k in ("mean_q", "max_q", "mean_target", "loss") if k in stats}
        if picked:
            parts.append(f"{pid}: " + " ".join(f"{k} {v:.3g}" for k, v in picked.items()))
    return "; ".join(parts)


def run(path: str, seed: int, overrides: List[str], steps: int, eval_episodes: int) -> Dict[str, Any]:
    from rlfleet.registry import get_trainer_class

    with open(path) as f:
        (name, spec), = yaml.safe_load(f).items()
    config = dict(spec.get("config") or {}, seed=seed)
    for item in overrides:
        key, _, raw = item.partition("=")
        _set(config, key, json.loads(raw))
    config["evaluation_duration"] = eval_episodes
    config.setdefault("evaluation_config", {})["explore"] = False
    trainer = get_trainer_class(spec["run"])(env=spec["env"], config=config)
    start = time.perf_counter()
    result: Dict[str, Any] = {}
    while not result or result["timesteps_total"] < steps:
        result = trainer.train()
        print(f"{result['timesteps_total']:>7} steps  return {result['episode_reward_mean']:8.2f}  "
              f"{_q_stats(result)}", flush=True)
    greedy = trainer.evaluate()["evaluation"]
    trainer.stop()
    return {"yaml": path, "seed": seed, "set": overrides, "steps": int(result["timesteps_total"]),
            "train_return": round(float(result["episode_reward_mean"]), 2),
            "greedy_return": round(float(greedy["episode_reward_mean"]), 2),
            "eval_episodes": int(greedy["episodes_this_iter"]), "seconds": round(time.perf_counter() - start)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("yaml", help="a tuned example (one experiment)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="one config change")
    parser.add_argument("--steps", type=int, required=True, help="env steps to train")
    parser.add_argument("--eval-episodes", type=int, default=50, help="greedy evaluation episodes (>= 20)")
    args = parser.parse_args()
    if args.eval_episodes < 20:
        parser.error("--eval-episodes: the comparisons use at least 20 evaluation episodes")
    print(json.dumps(run(args.yaml, args.seed, args.set, args.steps, args.eval_episodes)), flush=True)


if __name__ == "__main__":
    main()
