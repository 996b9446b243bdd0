"""League self-play on connect four: PPO trains a main policy against itself and its frozen
snapshots (PFSP matchmaking), then plays head to head against a uniformly random legal-move
player and against its first snapshot.

    python examples/league_connect_four.py                     # 400k env steps, measured in docs/guides/league.md
    python examples/league_connect_four.py --timesteps 20000 --eval-games 20   # a smoke run
    python examples/league_connect_four.py --random-prob 0 --keep-best 0 --heuristic-prob 0   # the earlier league

Prints the league table every iteration and, at the end, one JSON line with the match
results (wins, losses, draws, illegal moves, from main's side), for main as trained and for
the kept best main (`"best"`, `main_best`), and why greedy main lost its games against the
random player (`"losses_vs_random"`: missed a win, missed a block, a double threat, or a move
that opened a win).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import time

from pettingzoo.classic import connect_four_v3

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env.pettingzoo import PettingZooEnv
from rlfleet.env.registry import register_env
from rlfleet.league import LeagueCallbacks, LeagueSettings
from rlfleet.policy.examples.connect_four import ConnectFourHeuristicPolicy, heuristic_player, loss_reason
from rlfleet.league.matches import play_games, policy_player, random_legal_player
from rlfleet.policy.policy_spec import PolicySpec

# The scripted member's policy id (win if it can, block if it must, else random).
HEURISTIC = "heuristic"


class ConnectFourLeague(LeagueCallbacks):
    """The league's settings; a module-level subclass, so checkpoints name it."""

    # Half the games against a uniformly random member, and main's weights kept from the
    # iteration it beat that member most: against snapshots alone, main's wins against a
    # random player fell with training and swung from iteration to iteration
    # (docs/guides/ars-and-league-tuning.md).
    # A scripted member that wins when it can and blocks when it must takes every open three
    # main leaves (a random player: 1 in 7), so that main learns to block.
    settings = LeagueSettings(main="main", seats=("player_0", "player_1"), snapshot_every=5,
                              self_play_prob=0.2, pfsp_p=2.0, pfsp_floor=0.05, random_prob=0.3, keep_best=True,
                              fixed_members={HEURISTIC: 0.3})


def main_only(agent_id, episode=None, worker=None, **kwargs) -> str:
    # Only until the league hands every worker its own mapping (at trainer start).
    return "main"


def config(seed: int, **league_settings) -> dict:
    """The trainer config; `league_settings` (e.g. `random_prob=0`) replace the league's."""
    callbacks, settings = ConnectFourLeague, ConnectFourLeague.settings
    if league_settings:
        settings = dataclasses.replace(ConnectFourLeague.settings, **league_settings)
        callbacks = functools.partial(ConnectFourLeague, settings)
    policies = {"main": PolicySpec()}
    if HEURISTIC in settings.fixed_shares:
        policies[HEURISTIC] = PolicySpec(policy_class=ConnectFourHeuristicPolicy)
    return {
        "seed": seed,
        "callbacks": callbacks,
        "multiagent": {"policies": policies, "policies_to_train": ["main"], "policy_mapping_fn": main_only,
                       # Snapshots beyond 8 wait on disk (the policy map's LRU) until drawn.
                       "policy_map_capacity": 8},
        "num_workers": 0,
        "num_envs_per_worker": 8,
        "rollout_fragment_length": 250,
        "train_batch_size": 4000,
        "sgd_minibatch_size": 500,
        "num_sgd_iter": 6,
        "lr": 3e-4,
        "gamma": 0.99,
        # A game's one reward comes at its end, up to 21 moves on: GAE's lambda below 1 lowers
        # the variance of the early moves' advantages (lambda 1 is the Monte-Carlo return).
        "lambda": 0.95,
        # The entropy bonus falls towards 0 at 400k steps (0.005 at the default 200k). Trained to
        # 500k, main lost more often to the random player (docs/guides/ars-and-league-tuning.md).
        "entropy_coeff": 0.01,
        "entropy_coeff_schedule": [[0, 0.01], [400_000, 0.0]],
        # The board as a [6, 7, 2] image beside the mask: 3x3 convolutions see a line of stones
        # wherever it lies, where a dense net on the flat board has to learn each place anew
        # (seed 2 at 400k steps: 93.5 % against random with fcnet_hiddens [256, 256]).
        # One tower for the policy and the value halves the time an iteration takes.
        "model": {"conv_filters": [[32, [3, 3], 1], [32, [3, 3], 1], [256, [6, 7], 1]], "vf_share_layers": True},
    }


def vs_random(trainer, args, policy_id: str = "main") -> dict:
    """A policy against a random legal-move player: greedy, and sampling its moves."""
    return {mode: play_games(connect_four_v3.env, policy_player(trainer, policy_id, explore=explore),
                             random_legal_player(args.seed), args.eval_games, seed=args.seed)
            for mode, explore in (("greedy", False), ("sampled", True))}


def losses_vs_random(trainer, args, policy_id: str = "main") -> dict:
    """Why greedy `policy_id` lost its games against the random player: `{reason: count}`
    (`loss_reason`, judged at its last move), `{seat: count}`, and the first lost games' moves."""
    lost = []
    play_games(connect_four_v3.env, policy_player(trainer, policy_id), random_legal_player(args.seed),
               args.eval_games, seed=args.seed, lost=lost)
    reasons, seats = {}, {}
    for game in lost:
        reason = loss_reason(game["moves"], 0 if game["seat"] == "player_0" else 1)
        reasons[reason] = reasons.get(reason, 0) + 1
        seats[game["seat"]] = seats.get(game["seat"], 0) + 1
    return {"reasons": reasons, "seats": seats, "first_games": lost[:3]}


def vs_heuristic(trainer, args, policy_id: str = "main") -> dict:
    """Greedy `policy_id` against the scripted player (wins if it can, blocks if it must)."""
    return play_games(connect_four_v3.env, policy_player(trainer, policy_id), heuristic_player(args.seed),
                      args.eval_games, seed=args.seed)


def vs_first_snapshot(trainer, args, policy_id: str = "main") -> dict:
    """A policy against the league's first snapshot, both sampling their moves (two greedy
    players would replay the same two games)."""
    first = trainer.callbacks.league.snapshots[0]
    return play_games(connect_four_v3.env, policy_player(trainer, policy_id, explore=True),
                      policy_player(trainer, first, explore=True), args.eval_games, seed=args.seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 400k: the entropy bonus has fallen to 0; 600k made main worse against a random player (seed 2).
    parser.add_argument("--timesteps", type=int, default=400_000, help="env steps to train for")
    parser.add_argument("--eval-games", type=int, default=200, help="games per head-to-head match")
    parser.add_argument("--eval-every", type=int, default=0,
                        help="also play --eval-games games against the random player every this many iterations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--random-prob", type=float, default=None,
                        help="share of training games against the league's random member "
                             f"(default {ConnectFourLeague.settings.random_prob})")
    parser.add_argument("--keep-best", type=int, choices=(0, 1), default=None,
                        help="1: keep main's best weights by its training games against the random member "
                             f"(default {int(ConnectFourLeague.settings.keep_best)})")
    parser.add_argument("--heuristic-prob", type=float, default=None,
                        help="share of training games against the scripted member (win if it can, block if it "
                             f"must; default {ConnectFourLeague.settings.fixed_shares[HEURISTIC]}, 0: none)")
    args = parser.parse_args()

    register_env("connect_four", lambda ctx: PettingZooEnv(connect_four_v3.env()))
    overrides = {key: value for key, value in (("random_prob", args.random_prob), ("keep_best", args.keep_best))
                 if value is not None}
    if "keep_best" in overrides:
        overrides["keep_best"] = bool(overrides["keep_best"])
    if args.heuristic_prob is not None:
        overrides["fixed_members"] = {HEURISTIC: args.heuristic_prob} if args.heuristic_prob > 0 else {}
    trainer = PPOTrainer(env="connect_four", config=config(args.seed, **overrides))
    start = time.time()
    try:
        while True:
            result = trainer.train()
            table = {opp: f"{row['win_rate']:.2f}/{row['games']}" for opp, row in result["league"].items()}
            best = result.get("league_best")
            kept = f" best: {best['win_rate']:.2f} at iter {best['iteration']}" if best else ""
            print(f"iter {result['training_iteration']} steps {result['timesteps_total']} "
                  f"{time.time() - start:.0f}s win_rate/games: {table}{kept}", flush=True)
            if args.eval_every and result["training_iteration"] % args.eval_every == 0:
                print(json.dumps({"timesteps": result["timesteps_total"], "vs_random": vs_random(trainer, args)}),
                      flush=True)
            if result["timesteps_total"] >= args.timesteps:
                break
        train_s = time.time() - start
        report = {
            "timesteps": result["timesteps_total"], "iterations": result["training_iteration"],
            "train_minutes": round(train_s / 60, 1), "snapshots": len(trainer.callbacks.league.snapshots),
            "vs_random": vs_random(trainer, args), "losses_vs_random": losses_vs_random(trainer, args),
            "vs_heuristic": vs_heuristic(trainer, args),
        }
        if trainer.callbacks.league.snapshots:
            report["vs_first_snapshot"] = vs_first_snapshot(trainer, args)
        best = trainer.callbacks.league.best
        if best is not None:  # keep_best: the kept main, judged the same way
            best_id = trainer.callbacks.settings.best_id
            report["best"] = {"iteration": best["iteration"], "train_win_rate_vs_random": best["win_rate"],
                              "vs_random": vs_random(trainer, args, best_id)}
            if trainer.callbacks.league.snapshots:
                report["best"]["vs_first_snapshot"] = vs_first_snapshot(trainer, args, best_id)
        print(json.dumps(report), flush=True)
    finally:
        trainer.stop()


if __name__ == "__main__":
    main()
