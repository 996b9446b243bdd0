"""A CartPole simulator that drives a policy server (cartpole_server.py) through a PolicyClient.

    python examples/serving/cartpole_client.py --address http://127.0.0.1:9900 --inference-mode remote

It plays episodes until killed (or `--episodes`); `--logged-fraction` of them act by a random
controller and are only logged (`log_action`: off-policy data). It keeps going through
server restarts (the client retries with backoff).
"""
from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import numpy as np

from rlfleet.serving import PolicyClient


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="http://127.0.0.1:9900")
    parser.add_argument("--inference-mode", default="remote", choices=["remote", "local"])
    parser.add_argument("--update-interval", type=float, default=2.0)
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--episodes", type=int, default=0, help="0: play until killed")
    parser.add_argument("--logged-fraction", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    client = PolicyClient(args.address, inference_mode=args.inference_mode, update_interval=args.update_interval,
                          token=args.token, tls_ca=args.tls_ca)
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(args.seed)
    obs, _ = env.reset(seed=args.seed)
    played = 0
    while args.episodes == 0 or played < args.episodes:
        eid = client.start_episode()
        logged = rng.random() < args.logged_fraction
        while True:
            if logged:
                action = int(rng.integers(2))
                client.log_action(eid, obs.tolist(), action)
            else:
                action = client.get_action(eid, obs.tolist())
            obs, reward, terminated, truncated, _ = env.step(action)
            client.log_returns(eid, float(reward))
            if terminated or truncated:
                client.end_episode(eid, obs.tolist(), truncated=truncated and not terminated)
                obs, _ = env.reset()
                played += 1
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
