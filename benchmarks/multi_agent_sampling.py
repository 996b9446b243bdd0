"""Multi-agent sampling throughput: the general multi-agent path vs the single-agent fast path.

In one run: agent steps per second of `RolloutWorker.sample()` on the two-agent CartPole
(`MultiAgentCartPole`, two policies, one per agent) and on plain CartPole-v1 (one policy,
the fast path), both with `num_envs_per_worker` sub-envs and the default PPO model. The
two alternate for `--rounds` timed runs (other load on the machine hits both alike); the
median ratio and its spread are printed.

    python benchmarks/multi_agent_sampling.py [--steps 10000] [--envs 1 8] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Tuple


class AgentStepLoop:
    """A RolloutWorker on MultiAgentCartPole (2 agents, 2 policies) or on CartPole-v1."""

    def __init__(self, multi_agent: bool, num_envs: int, seed: int = 0):
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
        self.worker = RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config)
        self.worker.sample()  # warm-up

    def run(self, total_steps: int) -> Tuple[int, float]:
        """`(agent steps, seconds)` for at least `total_steps` agent steps."""
        steps = 0
        start = time.perf_counter()
        while steps < total_steps:
            steps += self.worker.sample().agent_steps()
        return steps, time.perf_counter() - start

    def stop(self) -> None:
        self.worker.stop()


def agent_steps_per_second(multi_agent: bool, num_envs: int, total_steps: int, seed: int = 0) -> float:
    loop = AgentStepLoop(multi_agent, num_envs, seed)
    steps, seconds = loop.run(total_steps)
    loop.stop()
    return steps / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10000, help="agent steps per timed run")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (the median ratio is reported)")
    args = parser.parse_args()
    print(f"median of {args.rounds} interleaved rounds of {args.steps} agent steps; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'envs':>5} {'fast path (1 agent)':>20} {'multi-agent (2 agents)':>23}  ratio (min-max)   [agent steps/s]")
    for n in args.envs:
        fast_loop, multi_loop = AgentStepLoop(False, n), AgentStepLoop(True, n)
        fast, multi, ratios = [], [], []
        for _ in range(args.rounds):
            s1, t1 = fast_loop.run(args.steps)
            s2, t2 = multi_loop.run(args.steps)
            fast.append(s1 / t1)
            multi.append(s2 / t2)
            ratios.append(multi[-1] / fast[-1])
        fast_loop.stop()
        multi_loop.stop()
        print(f"{n:>5} {statistics.median(fast):>20,.0f} {statistics.median(multi):>23,.0f}  "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
