"""A training server for CartPole played by external simulators (cartpole_client.py).

    python examples/serving/cartpole_server.py --port 9900 --stop-reward 150
    python examples/serving/cartpole_client.py --address http://127.0.0.1:9900 --inference-mode local

The trainer has no env: its `input` is a policy server on `port + worker_index` for every
worker that samples (`--num-workers 0`: the trainer's own, on `port`; N: workers 1..N on
port+1..port+N). Each iteration prints one JSON line (`timesteps_total`,
`episode_reward_mean`, ...); with `--checkpoint-dir` it saves a checkpoint after each one and
`--restore` continues from the latest there. `--print-trained-episodes` also prints, for each
batch of "remote" episodes training takes, `{"trained_episode_ids": [...]}` (the clients' ids of
the episodes that ended in it).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import gymnasium as gym

from rlfleet.checkpoint.folder import list_checkpoints
from rlfleet.registry import get_trainer_class
from rlfleet.serving import policy_server_input

# PPO as tuned_examples/ppo/cartpole-ppo-external.yaml; DQN as tuned_examples/dqn/cartpole-dqn.yaml.
CONFIGS = {
    "PPO": {"rollout_fragment_length": 256, "train_batch_size": 512, "sgd_minibatch_size": 128, "num_sgd_iter": 10,
            "lr": 0.0003, "model": {"fcnet_hiddens": [64, 64]}},
    "DQN": {"lr": 0.001, "n_step": 3, "train_batch_size": 64, "learning_starts": 500, "hiddens": [64],
            "model": {"fcnet_hiddens": [64]}, "exploration_config": {"epsilon_timesteps": 5000},
            "rollout_fragment_length": 4},
}


def make_config(args: argparse.Namespace) -> dict:
    env = gym.make("CartPole-v1")
    server_kwargs = {"token": args.token} if args.token else {}
    if args.print_trained_episodes:
        server_kwargs["on_batch_taken"] = _print_trained
    return dict(CONFIGS[args.run], env=None, observation_space=env.observation_space, action_space=env.action_space,
                input=policy_server_input(args.address, args.port, **server_kwargs), input_evaluation=[],
                num_workers=args.num_workers, seed=args.seed, metrics_smoothing_episodes=20, min_iter_time_s=0)


def _print_trained(episode_ids) -> None:
    print(json.dumps({"trained_episode_ids": episode_ids}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="PPO", choices=sorted(CONFIGS))
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9900)
    parser.add_argument("--token", default=None)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-reward", type=float, default=150.0)
    parser.add_argument("--stop-timesteps", type=int, default=100_000)
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--restore", action="store_true", help="continue from the latest checkpoint in --checkpoint-dir")
    parser.add_argument("--print-trained-episodes", action="store_true",
                        help='print {"trained_episode_ids": [...]} for each batch of "remote" episodes trained on')
    args = parser.parse_args(argv)
    config = make_config(args)
    trainer_class = get_trainer_class(args.run)
    latest = list_checkpoints(args.checkpoint_dir)[-1:] if args.restore and args.checkpoint_dir and \
        os.path.isdir(args.checkpoint_dir) else []
    if latest:
        trainer = trainer_class.from_checkpoint(latest[0], config_overrides={"input": config["input"]})
    else:
        trainer = trainer_class(config=config)
    try:
        while True:
            result = trainer.train()
            line = {k: result[k] for k in ("training_iteration", "timesteps_total", "episode_reward_mean",
                                           "episodes_total")}
            if args.checkpoint_dir:
                line["checkpoint"] = trainer.save(args.checkpoint_dir)
            print(json.dumps(line), flush=True)
            if result["episode_reward_mean"] >= args.stop_reward or result["timesteps_total"] >= args.stop_timesteps:
                return 0
    finally:
        trainer.stop()


if __name__ == "__main__":
    sys.exit(main())
