"""AlphaZero's figures: connect four against a random and a one-ply scripted player, and a sparse
single-player task with ranked rewards against its known optimum.

    python benchmarks/alphazero.py --seeds 0 1 2            # both parts, prints the table
    python benchmarks/alphazero.py --part corridor --seeds 0

Connect four (benchmarks/alphazero_connect_four.yaml): per seed, self-play for `--steps` moves,
then matches of `--games` games, seats alternating, against
- `random`: uniformly random legal moves;
- `one-ply`: rlfleet.policy.examples.connect_four's scripted player (wins if it can, blocks if
  it must, else random).
The search is itself a player, so each match names its simulations per move (`--eval-sims`,
most visited move, no root noise; `AlphaZeroTrainer.search_player`); the `net` rows play the trained network alone (argmax
of its masked priors, no search), and the `untrained` rows the same search with the seed's
untrained network (the first seed's), to show what training added.

Sparse corridor (tuned_examples/alphazero/sparse-corridor-alphazero.yaml): per seed, training
for its whole step budget (noting when the training return first met the example's target),
then the greedy returns against the optimum (15) of the search (`--eval-sims-corridor`), the
network alone, and the same search with the untrained network.
The last line is the JSON of every row. Run one at a time on a shared machine, under `timeout`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import yaml

from rlfleet.algorithms.alphazero import AlphaZeroTrainer, SearchGame
from rlfleet.algorithms.alphazero.players import observation_player, play_episode, play_match, random_player
from rlfleet.env.examples.connect_four import ConnectFourEnv
from rlfleet.env.examples.sparse_corridor import SparseCorridorEnv
from rlfleet.policy.examples.connect_four import heuristic_player

ROOT = Path(__file__).resolve().parents[1]
CONNECT_FOUR = ROOT / "benchmarks" / "alphazero_connect_four.yaml"
CORRIDOR = ROOT / "tuned_examples" / "alphazero" / "sparse-corridor-alphazero.yaml"


def _experiment(path: Path) -> Dict[str, Any]:
    (spec,) = yaml.safe_load(path.read_text()).values()
    return spec


def _trainer(spec: Dict[str, Any], seed: int, logdir: str) -> AlphaZeroTrainer:
    return AlphaZeroTrainer(config=dict(spec["config"], seed=seed), env=spec["env"], logdir=logdir)


def _net_player(trainer: AlphaZeroTrainer):
    policy = trainer.get_policy()
    transform = trainer.workers.local_worker().preprocessors["default_policy"].transform

    def act(game, state, obs, mover, ret=0.0) -> int:
        priors, _ = policy.evaluate(transform(obs)[None])
        legal = np.asarray(obs["action_mask"]) > 0
        return int(np.argmax(np.where(legal, priors[0], -1.0)))
    return act


def _rate(counts: Dict[str, int]) -> float:
    return counts["win"] / max(1, sum(counts[k] for k in ("win", "loss", "draw")))


def connect_four(seed: int, args, rows: List[Dict[str, Any]], logdir: str) -> None:
    spec = _experiment(CONNECT_FOUR)
    game = SearchGame(ConnectFourEnv())
    steps = args.steps or spec["stop"]["timesteps_total"]
    untrained = _trainer(spec, seed, f"{logdir}/c4-untrained-{seed}")
    trainer = _trainer(spec, seed, f"{logdir}/c4-{seed}")
    start = time.time()
    while trainer.counters["num_env_steps_sampled"] < steps:
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        print(f"  seed {seed} it {result['training_iteration']}: {result['timesteps_total']} moves, "
              f"policy loss {stats['policy_loss']:.3f}, value loss {stats['vf_loss']:.3f}", flush=True)
    train_s = time.time() - start
    opponents = {"random": lambda s: random_player(s), "one-ply": lambda s: observation_player(heuristic_player(s))}
    plays = [("search", sims, trainer.search_player(sims, seed)) for sims in args.eval_sims]
    plays.append(("net", 0, _net_player(trainer)))
    if seed == args.seeds[0]:
        plays += [("untrained", sims, untrained.search_player(sims, seed)) for sims in args.eval_sims]
    for name, sims, player in plays:
        for opponent, make in opponents.items():
            if opponent == "one-ply" and name == "search" and seed not in args.heuristic_seeds:
                continue
            t0 = time.time()
            counts = play_match(game, player, make(1000 + seed), args.games, seed=10_000 * (seed + 1))
            row = dict(task="connect four", seed=seed, player=name, sims=sims, opponent=opponent, games=args.games,
                       win_rate=_rate(counts), **counts, train_moves=trainer.counters["num_env_steps_sampled"],
                       train_s=round(train_s), eval_s=round(time.time() - t0))
            rows.append(row)
            print(f"  {row}", flush=True)
    trainer.stop()
    untrained.stop()


def corridor(seed: int, args, rows: List[Dict[str, Any]], logdir: str) -> None:
    spec = _experiment(CORRIDOR)
    untrained = _trainer(spec, seed, f"{logdir}/corridor-untrained-{seed}")
    trainer = _trainer(spec, seed, f"{logdir}/corridor-{seed}")
    start, result, reached_at = time.time(), {}, None
    # The whole budget, not the example's reward stop: the greedy players are judged after it.
    while trainer.counters["num_env_steps_sampled"] < spec["stop"]["timesteps_total"]:
        result = trainer.train()
        if reached_at is None and result["episode_reward_mean"] >= spec["stop"]["episode_reward_mean"]:
            reached_at = result["timesteps_total"]
    print(f"  seed {seed}: training return {result['episode_reward_mean']:.2f} after {result['timesteps_total']} "
          f"steps (the example's target first at {reached_at})", flush=True)
    env = SparseCorridorEnv(spec["config"].get("env_config"))
    game = SearchGame(env)
    sims = args.eval_sims_corridor
    for name, sims, player in (("search", sims, trainer.search_player(sims, seed)), ("net", 0, _net_player(trainer)),
                               ("untrained", sims, untrained.search_player(sims, seed))):
        returns = [play_episode(game, player, seed=s) for s in range(5)]
        rows.append(dict(task="sparse corridor", seed=seed, player=name, sims=sims, optimum=env.optimal_return(),
                         greedy_return=float(np.mean(returns)), train_return=result.get("episode_reward_mean"),
                         train_steps=result.get("timesteps_total"), target_at=reached_at,
                         train_s=round(time.time() - start)))
        print(f"  {rows[-1]}", flush=True)
    trainer.stop()
    untrained.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "connect_four", "corridor"), default="all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--heuristic-seeds", type=int, nargs="+", default=[0],
                        help="seeds whose search also plays the one-ply player (the costliest match)")
    parser.add_argument("--steps", type=int, default=0, help="connect four self-play moves (0: the YAML's)")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--eval-sims", type=int, nargs="+", default=[50, 100],
                        help="simulations per move of the connect four search (one set of matches each)")
    parser.add_argument("--eval-sims-corridor", type=int, default=20)
    parser.add_argument("--logdir", default="/tmp/rlfleet_alphazero_bench")
    args = parser.parse_args(argv)
    rows: List[Dict[str, Any]] = []
    for seed in args.seeds:
        if args.part in ("all", "corridor"):
            corridor(seed, args, rows, args.logdir)
        if args.part in ("all", "connect_four"):
            connect_four(seed, args, rows, args.logdir)
    print("\n| task | seed | player | sims/move | opponent | result |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["task"] == "connect four":
            result = f"{r['win_rate']:.1%} wins ({r['win']}-{r['loss']}-{r['draw']} of {r['games']})"
        else:
            result = f"greedy return {r['greedy_return']:.1f} (optimum {r['optimum']:.0f})"
        print(f"| {r['task']} | {r['seed']} | {r['player']} | {r['sims']} | {r.get('opponent', '-')} | {result} |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
