"""Two agents in one external multi-agent env, each trained by its own PPO policy.

    python examples/serving/two_agent_external.py [--stop-reward 150]

`TwoExternalCartPoles` (rlfleet.env.examples.external_cartpole) is an ExternalMultiAgentEnv:
its own thread runs episodes in which agents 0 and 1 each balance a pole, asking for both
actions at once with `get_action(eid, {0: obs0, 1: obs1})`. Agent i is mapped to policy
"p<i>". The same dict-per-agent calls work through a PolicyClient against a multi-agent
policy server (`multiagent` set in the server's config).
"""
from __future__ import annotations

import argparse
import json
import sys

from rlfleet.env.examples.external_cartpole import TwoExternalCartPoles
from rlfleet.registry import get_trainer_class


def policy_for_agent(agent_id, episode, worker=None, **kwargs) -> str:
    return f"p{agent_id}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stop-reward", type=float, default=150.0, help="mean episode return (both poles summed)")
    parser.add_argument("--stop-timesteps", type=int, default=100_000)
    args = parser.parse_args(argv)
    config = {"seed": 0, "rollout_fragment_length": 256, "train_batch_size": 512, "sgd_minibatch_size": 128,
              "num_sgd_iter": 10, "lr": 0.0003, "model": {"fcnet_hiddens": [64, 64]}, "input_evaluation": [],
              "metrics_smoothing_episodes": 20,
              "multiagent": {"policies": {"p0", "p1"}, "policy_mapping_fn": policy_for_agent}}
    trainer = get_trainer_class("PPO")(env=TwoExternalCartPoles, config=config)
    try:
        while True:
            result = trainer.train()
            print(json.dumps({"timesteps_total": result["timesteps_total"],
                              "episode_reward_mean": round(result["episode_reward_mean"], 1),
                              "policy_reward_mean": {k: round(v, 1) for k, v in result["policy_reward_mean"].items()}}),
                  flush=True)
            if result["episode_reward_mean"] >= args.stop_reward or result["timesteps_total"] >= args.stop_timesteps:
                return 0
    finally:
        trainer.stop()


if __name__ == "__main__":
    sys.exit(main())
