"""Multi-agent sampling throughput: the general multi-agent path vs the single-agent fast path.

In one run: agent steps per second of `RolloutWorker.sample()` on the two-agent CartPole
(`MultiAgentCartPole`, two policies, one per agent) and on plain CartPole-v1 (one policy,
the fast path), both with `num_envs_per_worker` sub-envs and the default PPO model.

    python benchmarks/multi_agent_sampling.py [--steps 20000] [--envs 1 8]
"""
from __future__ import annotations

import argparse
import time


def agent_steps_per_second(multi_agent: bool, num_envs: int, total_steps: int, seed: int = 0) -> float:
    from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
    from rlfleet.config import merge_configs, validate_config
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
    from rlfleet.env.registry import resolve_env
    from rlfleet.rollout.rollout_worker import RolloutWorker

    extra = {"num_envs_per_worker": num_envs, "rollout_fragment_length": 200, "seed": seed}
    if multi_agent:
        extra.update(env_config={"num_agents": 2}, multiagent={
            "policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"})
        creator = MultiAgentCartPole
    else:
        creator = resolve_env("CartPole-v1")[1]
    config = merge_configs(DEFAULT_CONFIG, extra)
    validate_config(config)
    worker = RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config)
    worker.sample()  # warm-up
    steps = 0
    start = time.perf_counter()
    while steps < total_steps:
        batch = worker.sample()
        steps += batch.agent_steps()
    rate = steps / (time.perf_counter() - start)
    worker.stop()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    print(f"{'envs':>5} {'fast path (1 agent)':>20} {'multi-agent (2 agents)':>23} {'ratio':>6}   [agent steps/s]")
    for n in args.envs:
        fast = agent_steps_per_second(False, n, args.steps)
        multi = agent_steps_per_second(True, n, args.steps)
        print(f"{n:>5} {fast:>20,.0f} {multi:>23,.0f} {multi / fast:>6.2f}")


if __name__ == "__main__":
    main()
