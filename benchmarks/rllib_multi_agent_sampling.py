"""Multi-agent sampling side by side with RLlib 2.x on the same two-agent CartPole.

RLlib is a peer here, never a dependency of rlfleet (`pip install "ray[rllib]"`; this file is
the only place it is imported). Both libraries sample two-agent CartPole (two independent
CartPole-v1 poles, one policy per agent) with `--envs` sub-envs in one process, PPO's
default fully connected model on both sides ([256, 256] tanh; RLlib's default RLModule and
rlfleet's default model) and one torch thread. Each also samples plain CartPole-v1 with one
agent, so each library's multi-agent cost is put beside its own single-agent cost too.

Measured: agent steps per CPU second of this process (`time.process_time`), sampling with
exploration as in training: RLlib's local `EnvRunner.sample(num_timesteps=...)` (new API
stack, `MultiAgentEnvRunner` / `SingleAgentEnvRunner`) against rlfleet's
`RolloutWorker.sample()` through its general (dict) path, its vectorised (slot) path and the
single-agent vectorised sampler. The kinds alternate for `--rounds` rounds; medians and the spread of
the ratios to RLlib's multi-agent runner are printed.

    python benchmarks/rllib_multi_agent_sampling.py --envs 8 --steps 20000 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _rllib_runner(num_envs: int, agents: int, seed: int, fragment: int = 200) -> Callable[[int], int]:
    """A sampling function over RLlib's local env runner: `sample(steps) -> agent steps done`."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole

    config = (PPOConfig().framework("torch")
              .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs, rollout_fragment_length=fragment)
              .training(train_batch_size=fragment * num_envs)
              .debugging(seed=seed))
    if agents == 1:
        config = config.environment("CartPole-v1")
    else:
        config = (config.environment(MultiAgentCartPole, env_config={"num_agents": agents})
                  .multi_agent(policies={f"p{i}" for i in range(agents)},
                               policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}"))
    algo = config.build_algo()
    runner = algo.env_runner

    def sample(steps: int) -> int:
        # One call per fragment of every sub-env, as a training iteration would ask, the size of
        # rlfleet's `sample()` below (`rollout_fragment_length` x envs).
        done = 0
        while done < steps:
            episodes = runner.sample(num_timesteps=fragment * num_envs)
            done += sum(ep.agent_steps() if hasattr(ep, "agent_steps") else len(ep) for ep in episodes)
        return done

    sample.stop = algo.stop  # type: ignore[attr-defined]
    return sample


def _rlfleet_runner(kind: str, num_envs: int, seed: int) -> Callable[[int], int]:
    from multi_agent_sampling import AgentStepLoop

    loop = AgentStepLoop(kind, num_envs, seed=seed)

    def sample(steps: int) -> int:
        done = 0
        while done < steps:
            done += loop.worker.sample().agent_steps()
        return done

    sample.stop = loop.stop  # type: ignore[attr-defined]
    return sample


def _timed(sample: Callable[[int], int], steps: int) -> Tuple[int, float]:
    start = time.process_time()
    done = sample(steps)
    return done, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20_000, help="agent steps per timed run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import ray
    import torch

    torch.set_num_threads(1)
    print(f"ray {ray.__version__}, torch {torch.__version__}; {args.envs} envs, {args.rounds} rounds of "
          f">= {args.steps} agent steps [agent steps per CPU second of this process]")
    makers: Dict[str, Callable[[], Callable[[int], int]]] = {
        "rllib (2 agents)": lambda: _rllib_runner(args.envs, 2, args.seed),
        "rllib (1 agent)": lambda: _rllib_runner(args.envs, 1, args.seed),
        "rlfleet dict (2)": lambda: _rlfleet_runner("dict", args.envs, args.seed),
        "rlfleet vector (2)": lambda: _rlfleet_runner("vector", args.envs, args.seed),
        "rlfleet fast (1)": lambda: _rlfleet_runner("fast", args.envs, args.seed),
    }
    samplers = {name: make() for name, make in makers.items()}
    for sample in samplers.values():
        sample(1000)  # warm-up: first forward passes, episode starts
    rates: Dict[str, List[float]] = {name: [] for name in samplers}
    for _ in range(args.rounds):
        for name, sample in samplers.items():
            done, seconds = _timed(sample, args.steps)
            rates[name].append(done / seconds)
    for sample in samplers.values():
        sample.stop()  # type: ignore[attr-defined]
    base = rates["rllib (2 agents)"]
    print(f"{'sampler':<20} {'median':>10} {'min':>10} {'max':>10}  {'/ rllib (2 agents), median (min-max)':>36}")
    for name, r in rates.items():
        ratios = [a / b for a, b in zip(r, base)]
        print(f"{name:<20} {statistics.median(r):>10,.0f} {min(r):>10,.0f} {max(r):>10,.0f}  "
              f"{statistics.median(ratios):>14.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
