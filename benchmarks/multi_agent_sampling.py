"""Multi-agent sampling throughput: the general (dict) path and the vectorised (slot) path
against the single-agent vectorised sampler, and the vectorised path's cost as agents grow.

All figures are CPU time of this process (`time.process_time`), not wall time, so that other
load on the machine hardly moves them.

Part 1, in one run: agent steps per CPU second of `RolloutWorker.sample()` on two-agent
CartPole (two policies, one per agent) through the general path (`MultiAgentCartPole`,
dict API) and through the vectorised path (`SlotCopies`, slot API), and on plain
CartPole-v1 (one policy, the single-agent vectorised sampler), all with `num_envs_per_worker` sub-envs and the
default PPO model. The three alternate for `--rounds` timed runs; the median ratios to the
single-agent sampler and their spread are printed.

Part 2: the vectorised path on `CueSwarm` (one shared policy) with `--agents` agents per
sub-env: microseconds per agent step, less the env's own stepping (timed alone), and the
ratio to the 8-agent case (flat per-agent cost: ratios near 1 or below). `--dict-agents`
adds the general path on the same env (its dict API: the dicts count as sampler cost) for
the sizes given.

Part 3 (`--battle-maps`, needs magent2): MAgent2 battles through `MAgentSlots`, on the slot
path and (its dict API) on the general path, measured as part 2.

    python benchmarks/multi_agent_sampling.py            # parts 1 and 2, the defaults below
    python benchmarks/multi_agent_sampling.py --steps 10000 --envs 1 8 --rounds 3 \
        --agents 2 8 64 512 --swarm-envs 8 --dict-agents 2 8 64 --battle-maps 16 34 80
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List, Tuple

import numpy as np

SHARED = {"policies": {"shared"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: "shared"}
PER_TEAM = {"policies": {"red", "blue"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: aid.split("_")[0]}
PER_AGENT = {"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}


def _dict_only(env_class):
    """`env_class` (a slot env) behind the dict API only: the general path samples it."""
    from rlfleet.env.multi_agent_env import MultiAgentEnv

    class DictOnly(MultiAgentEnv):
        def __init__(self, config=None):
            self.env = env_class(config)
            self.possible_agents = self.env.possible_agents
            self.observation_space, self.action_space = self.env.observation_space, self.env.action_space

        def reset(self, *, seed=None, options=None):
            return self.env.reset(seed=seed, options=options)

        def step(self, action_dict):
            return self.env.step(action_dict)

    return DictOnly


def _battle(map_size: int, slots: bool):
    """A creator of MAgent2 battles on a `map_size` map through `MAgentSlots`: sampled on the
    slot path, or (not `slots`) behind its dict API on the general path (the same flattened
    observations, so that both run the same fully connected policies)."""
    def make(config=None):
        from magent2.environments import battle_v4

        from rlfleet.env.magent2_slots import MAgentSlots

        return MAgentSlots(battle_v4.parallel_env(map_size=map_size, max_cycles=100))
    return make if slots else _dict_only(make)


class AgentStepLoop:
    """A RolloutWorker on one of the benchmark's envs.

    Args:
        kind: "fast" (CartPole-v1, one policy: the single-agent vectorised sampler), "dict" / "vector"
            (two-agent CartPole, a policy per agent), "swarm" / "swarm-dict" (CueSwarm, one shared policy),
            "battle" / "battle-dict" (a MAgent2 battle, a policy per team).
        num_envs: sub-envs.
        num_agents: agents per sub-env (the swarm kinds); the map size (the battle kinds).
        fragment: `rollout_fragment_length`.
        shared: two-agent CartPole with one policy for both agents (else one per agent).
    """

    def __init__(self, kind: str, num_envs: int, num_agents: int = 2, fragment: int = 200, seed: int = 0,
                 shared: bool = False):
        from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
        from rlfleet.config import merge_configs, validate_config
        from rlfleet.env.examples.cue_swarm import CueSwarm
        from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
        from rlfleet.env.registry import resolve_env
        from rlfleet.env.vector_multi_agent_env import SlotCopies
        from rlfleet.rollout.rollout_worker import RolloutWorker

        extra = {"num_envs_per_worker": num_envs, "rollout_fragment_length": fragment, "seed": seed}
        creators = {"fast": resolve_env("CartPole-v1")[1], "dict": MultiAgentCartPole,
                    "vector": lambda config: SlotCopies("CartPole-v1", config), "swarm": CueSwarm,
                    "swarm-dict": _dict_only(CueSwarm), "battle": _battle(num_agents, slots=True),
                    "battle-dict": _battle(num_agents, slots=False)}
        if kind != "fast":
            extra["env_config"] = {"num_agents": num_agents}
            extra["multiagent"] = (SHARED if shared else PER_AGENT) if kind in ("dict", "vector") else (
                PER_TEAM if kind.startswith("battle") else SHARED)
        config = merge_configs(DEFAULT_CONFIG, extra)
        validate_config(config)
        self.worker = RolloutWorker(env_creator=creators[kind], policy_class=PPOTorchPolicy, config=config)
        self.worker.sample()  # warm-up

    def run(self, total_steps: int) -> Tuple[int, float]:
        """`(agent steps, CPU seconds)` for at least `total_steps` agent steps. CPU time
        (`time.process_time`: this process, all its threads), not wall time: other load on
        the machine then hardly moves the figures."""
        steps = 0
        start = time.process_time()
        while steps < total_steps:
            steps += self.worker.sample().agent_steps()
        return steps, time.process_time() - start

    def env_seconds(self, env_steps: int) -> float:
        """CPU seconds the worker's sub-envs take for `env_steps` steps on their own (slot
        envs stepped as the sampler steps them, with zero actions), for subtracting the
        env's own stepping from a run's time."""
        from rlfleet.env.vector_multi_agent_env import SlotMultiAgentEnv, VectorMultiAgentEnv

        # The dict-API kinds wrap a slot env (`_dict_only`): its arrays are the env's own work,
        # the dicts made of them part of the general path's cost.
        venv = VectorMultiAgentEnv([e if isinstance(e, SlotMultiAgentEnv) else e.env for e in self.worker.env.envs])
        for i in range(venv.num_envs):
            venv.reset_at(i)
        actions = {g: np.zeros((venv.num_envs, group.num_slots, *group.action_space.shape), np.int64)
                   for g, group in venv.groups.items()}
        start = time.process_time()
        for _ in range(env_steps):
            step = venv.step(actions)
            for i in np.flatnonzero(step.terminated_all | step.truncated_all):
                venv.reset_at(int(i))
        return time.process_time() - start

    def stop(self) -> None:
        self.worker.stop()


def agent_steps_per_second(kind: str, num_envs: int, total_steps: int, seed: int = 0) -> float:
    loop = AgentStepLoop(kind, num_envs, seed=seed)
    steps, seconds = loop.run(total_steps)
    loop.stop()
    return steps / seconds


def cartpole_table(envs: List[int], steps: int, rounds: int, shared: bool) -> None:
    print(f"Two-agent CartPole ({'one shared policy' if shared else 'a policy per agent'}) vs the single-agent "
          f"vectorised sampler: median of {rounds} alternated rounds of {steps} agent steps "
          f"[agent steps per CPU second]")
    print(f"{'envs':>5} {'single (1 agent)':>17} {'dict (2)':>10} {'vector (2)':>11}  "
          f"{'dict/single (min-max)':>22} {'vector/single (min-max)':>24}")
    for n in envs:
        loops = {kind: AgentStepLoop(kind, n, shared=shared) for kind in ("fast", "dict", "vector")}
        rates: Dict[str, List[float]] = {kind: [] for kind in loops}
        for _ in range(rounds):
            for kind, loop in loops.items():
                s, t = loop.run(steps)
                rates[kind].append(s / t)
        for loop in loops.values():
            loop.stop()
        ratios = {k: [r / f for r, f in zip(rates[k], rates["fast"])] for k in ("dict", "vector")}
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"{n:>5} {med['fast']:>17,.0f} {med['dict']:>10,.0f} {med['vector']:>11,.0f}  " + "  ".join(
            f"{statistics.median(r):>8.2f} ({min(r):.2f}-{max(r):.2f})" for r in ratios.values()))


def _cost_without_env(loop: AgentStepLoop, steps: int, rounds: int, slots_per_step: int) -> float:
    """Median over `rounds` of CPU microseconds per agent step of `loop`'s sampling, less the
    sub-envs' own stepping (timed alone for as many env steps: every slot live, so that
    is an upper bound of the env's share and the remainder a lower bound of the sampler's
    cost when agents die)."""
    samples = []
    for _ in range(rounds):
        s, t = loop.run(steps)
        env_t = loop.env_seconds(max(1, round(s / slots_per_step)))
        samples.append(1e6 * (t - env_t) / s)
    return statistics.median(samples)


def swarm_table(agents: List[int], dict_agents: List[int], num_envs: int, steps: int, rounds: int) -> None:
    print(f"\nCueSwarm, {num_envs} sub-envs, one shared policy: CPU microseconds per agent step excluding the "
          f"env's stepping (median of {rounds} rounds of >= {steps} agent steps)")
    print(f"{'agents':>7} {'vector':>9} {'vs 8 agents':>12} {'dict':>9}")
    costs: Dict[int, float] = {}
    for size in agents:
        fragment = max(5, min(100, steps // (size * num_envs)))
        per_kind = {}
        for kind in ("swarm",) + (("swarm-dict",) if size in dict_agents else ()):
            loop = AgentStepLoop(kind, num_envs, num_agents=size, fragment=fragment)
            per_kind[kind] = _cost_without_env(loop, steps, rounds, size * num_envs)
            loop.stop()
        costs[size] = per_kind["swarm"]
        base = costs.get(8)
        ratio = f"{costs[size] / base:.2f}" if base else "-"
        dict_cost = f"{per_kind['swarm-dict']:.2f}" if "swarm-dict" in per_kind else "-"
        print(f"{size:>7} {costs[size]:>9.2f} {ratio:>12} {dict_cost:>9}")


def battle_table(maps: List[int], dict_maps: List[int], steps: int, rounds: int) -> None:
    print(f"\nMAgent2 battle_v4, 1 sub-env, a policy per team: CPU microseconds per agent step excluding the "
          f"env's stepping (median of {rounds} rounds of >= {steps} agent steps)")
    print(f"{'map':>5} {'agents':>7} {'slot path':>10} {'dict path':>10}")
    from magent2.environments import battle_v4

    for size in maps:
        agents = len(battle_v4.parallel_env(map_size=size, max_cycles=1).possible_agents)
        per_kind = {}
        for kind in ("battle",) + (("battle-dict",) if size in dict_maps else ()):
            loop = AgentStepLoop(kind, 1, num_agents=size, fragment=max(5, min(100, steps // agents)))
            per_kind[kind] = _cost_without_env(loop, steps, rounds, agents)
            loop.stop()
        dict_cost = f"{per_kind['battle-dict']:.2f}" if "battle-dict" in per_kind else "-"
        print(f"{size:>5} {agents:>7} {per_kind['battle']:>10.2f} {dict_cost:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10000, help="agent steps per timed run")
    parser.add_argument("--envs", type=int, nargs="*", default=[1, 8], help="two-agent CartPole: sub-envs")
    parser.add_argument("--shared", action="store_true", help="two-agent CartPole: one policy for both agents")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (medians are reported)")
    parser.add_argument("--agents", type=int, nargs="*", default=[2, 8, 64, 512], help="CueSwarm sizes (8 first "
                        "sets the base of the ratios: it is measured first whatever the order)")
    parser.add_argument("--swarm-envs", type=int, default=8, help="CueSwarm: sub-envs")
    parser.add_argument("--swarm-steps", type=int, default=100000, help="CueSwarm: agent steps per timed run")
    parser.add_argument("--dict-agents", type=int, nargs="*", default=[2, 8, 64],
                        help="CueSwarm sizes also measured through the general path")
    parser.add_argument("--battle-maps", type=int, nargs="*", default=[],
                        help="MAgent2 battle map sizes (16: 12 agents, 34: 72, 80: 512; needs magent2)")
    parser.add_argument("--dict-maps", type=int, nargs="*", default=[16, 34],
                        help="battle map sizes also measured through the general path")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.envs:
        cartpole_table(args.envs, args.steps, args.rounds, args.shared)
    if args.agents:
        sizes = sorted(set(args.agents), key=lambda a: (a != 8, a))
        swarm_table(sizes, args.dict_agents, args.swarm_envs, args.swarm_steps, args.rounds)
    if args.battle_maps:
        battle_table(args.battle_maps, args.dict_maps, args.swarm_steps, args.rounds)


if __name__ == "__main__":
    main()
