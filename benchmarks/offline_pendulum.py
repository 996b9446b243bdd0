"""Offline learners on the same mixed-quality Pendulum-v1 data: BC, CRR, IQL (and CQL, MARWIL
with --algos). Decision Transformer's comparison on this data is benchmarks/decision_transformer.py.

The data: `write_mixed_pendulum_dataset` (rlfleet/offline/pendulum_dataset.py), written per
seed with that seed (as benchmarks/decision_transformer.py does), by default 100 episodes: half
from the scripted expert with its default noise on the torque (mean return about -150), half
from uniformly random torques (about -1175). Each learner trains for the given numbers of gradient updates; after each, its greedy
policy (`explore: False`) plays `--eval-episodes` episodes in the env.

Score (as benchmarks/decision_transformer.py): the normalized return
(R - R_random) / (R_expert - R_random), with R_expert and R_random the mean returns of the
seed's expert and random episodes: 1 is the expert's level, 0 random torques.

CRR and IQL take their tuned examples' configs (tuned_examples/{crr,iql}/pendulum-*.yaml) with
this dataset as input (and `learning_starts` / `buffer_size` set to its rows); BC's and
MARWIL's are below (the actors' net size and batch, lr 1e-3: the defaults' one step of 2000 rows
at lr 1e-4 would learn far less in as many updates); CQL takes its tuned example's.

    python benchmarks/offline_pendulum.py --algos CRR IQL --updates 10000 20000   # seeds 0-2
    python benchmarks/offline_pendulum.py --algos BC --updates 5000
    python benchmarks/offline_pendulum.py --seeds 0 --algos IQL --config '{"beta": 10}'
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from typing import Any, Dict, Iterator, List

import yaml

from rlfleet.offline.pendulum_dataset import write_mixed_pendulum_dataset
from rlfleet.registry import get_trainer_class

TUNED_EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tuned_examples")

ROWS_PER_EPISODE = 200  # Pendulum-v1's time limit
# BC and MARWIL read the file's lines in order (expert episodes first): `shuffle_buffer_size`
# draws each batch from random lines, as the replayed learners' buffers do.
_SUPERVISED = {"train_batch_size": 512, "lr": 1e-3, "shuffle_buffer_size": 100, "beta": 0.0,
               "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"}}
CONFIGS: Dict[str, Any] = {
    "BC": ("BC", _SUPERVISED),
    "MARWIL": ("MARWIL", {**_SUPERVISED, "beta": 1.0}),
    "CRR": "crr/pendulum-crr.yaml",
    "IQL": "iql/pendulum-iql.yaml",
    "CQL": "cql/pendulum-cql.yaml",
}


def trainer_for(algo: str, data: str, rows: int, seed: int, logdir: str, overrides: Dict[str, Any]):
    spec = CONFIGS[algo]
    if isinstance(spec, str):
        with open(os.path.join(TUNED_EXAMPLES, spec), encoding="utf-8") as f:
            (experiment,) = yaml.safe_load(f).values()
        run, config = experiment["run"], dict(experiment["config"])
    else:
        run, config = spec
        config = dict(config)
    if run == "BC":
        config.pop("beta")
    config.update(input=data, seed=seed, input_evaluation=[], log_sys_usage=False, evaluation_interval=None,
                  evaluation_config={"input": "sampler", "explore": False})
    if "learning_starts" in get_trainer_class(run)._default_config:  # replayed: the whole dataset, no more
        config.update(learning_starts=rows, buffer_size=rows, timesteps_per_iteration=1000)
    config.update(overrides)
    return get_trainer_class(run)(env="Pendulum-v1", config=config, logdir=logdir)


def run_one(algo: str, data: str, rows: int, seed: int, updates: List[int], eval_episodes: int, logdir: str,
            overrides: Dict[str, Any]) -> Iterator[Dict[str, float]]:
    """Trains `algo` and yields its evaluation after each count of gradient updates in `updates`
    (as it goes, so that a run stopped early still reports the counts it reached)."""
    trainer = trainer_for(algo, data, rows, seed, logdir, overrides)
    trainer.config["evaluation_num_episodes"] = eval_episodes
    train_s = 0.0
    try:
        policy = trainer.get_policy()
        for target in sorted(updates):
            start = time.perf_counter()
            while policy.num_grad_updates < target:
                trainer.train()
            train_s += time.perf_counter() - start
            result = trainer.evaluate()["evaluation"]
            yield {"return": float(result["episode_reward_mean"]), "updates": policy.num_grad_updates,
                   "train_s": train_s}
    finally:
        trainer.stop()


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["BC", "CRR", "IQL"], choices=sorted(CONFIGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--updates", type=int, nargs="+", default=[10000, 20000],
                        help="gradient updates per run; several: evaluate after each")
    parser.add_argument("--episodes", type=int, default=100, help="episodes in each seed's dataset (half expert)")
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--config", default="{}", help="JSON overrides of every learner's config")
    args = parser.parse_args(argv)
    overrides = json.loads(args.config)

    scores: Dict[Any, List[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            # Each seed its own data (as benchmarks/decision_transformer.py): the run's seed writes it.
            data = os.path.join(tmp, f"data{seed}")
            info = write_mixed_pendulum_dataset(data, episodes=args.episodes, expert_fraction=0.5, seed=seed)
            r_expert, r_random = info["expert_return"], info["random_return"]
            rows = args.episodes * ROWS_PER_EPISODE
            print(f"# seed {seed}: {args.episodes} episodes ({rows} rows), expert {r_expert:.1f}, random "
                  f"{r_random:.1f}", flush=True)
            for algo in args.algos:
                # closing: the trainer stops here, not when the generator is collected (after
                # the temporary folder holding its log is gone).
                with contextlib.closing(run_one(algo, data, rows, seed, args.updates, args.eval_episodes,
                                                os.path.join(tmp, "log"), overrides)) as outs:
                    for target, out in zip(sorted(args.updates), outs):
                        score = (out["return"] - r_random) / (r_expert - r_random)
                        scores.setdefault((algo, target), []).append(score)
                        print(f"{algo:6s} seed {seed}: {out['updates']:6d} updates  return {out['return']:8.1f}  "
                              f"score {score:5.2f}  ({out['train_s']:.0f} s)", flush=True)

    print(f"\nscore = (R - R_random) / (R_expert - R_random); {args.eval_episodes} greedy episodes per evaluation")
    print("| algorithm | updates | median score | min | max | seeds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (algo, updates), values in scores.items():
        print(f"| {algo} | {updates} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | "
              f"{len(values)} |")


if __name__ == "__main__":
    main()
