"""`sampling.py --vector-env`: `RolloutWorker.sample()` on a batched Gymnasium vector env
(`gymnasium.make_vec("CartPole-v1", vectorization_mode="vector_entry_point")`, rlfleet's
`gym_env_vectorize_mode: "vector_entry_point"`) against its arithmetic ceiling, timed in the same
rounds:

- the ceiling: the same vector env stepped in a bare loop, plus the policy model's own NumPy
  forward passes on the same arrays (one pass per step for the actions, one per 200-step chunk
  for the values) and the observations copied into a preallocated chunk; nothing else;
- ours: `RolloutWorker.sample()` with PPO's policy (fragments of 200 steps), everything included
  (episodes, checks, metrics, GAE postprocessing);
- Python ms per vector step: ours' wall time per vector step less its env and inference time
  (the sampler's own work, chunk-to-batch and postprocessing included: NumPy work on arrays that
  grow with the envs, plus the interpreter's);
- Python calls per vector step: the function calls the interpreter makes per vector step of
  `sample()` (cProfile's count over 2 fragments; the env's own and NumPy's C functions
  included), a load-independent measure of per-step Python work, which should stay flat as the
  number of envs grows (only the finished episodes' metrics rows, one call each, grow).

    python benchmarks/sampling.py --vector-env [--envs 64 256 1024] [--hiddens 64 64] [--rounds 3]
"""
from __future__ import annotations

import os
import statistics
import time
from typing import List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

CHUNK = 200


class VectorCeilingLoop:
    """The bare vector-env loop plus the model's forward passes (see the module docstring)."""

    def __init__(self, num_envs: int, hiddens: Optional[Sequence[int]] = None, seed: int = 0):
        from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
        from rlfleet.config import merge_configs
        from rlfleet.fast.distributions import sample_numpy
        from rlfleet.fast.inference import NumpyMLPInference

        self.venv = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")
        config = merge_configs(DEFAULT_CONFIG, {"model": {"fcnet_hiddens": list(hiddens)}} if hiddens else {})
        policy = PPOTorchPolicy(self.venv.single_observation_space, self.venv.single_action_space, config)
        self.net = NumpyMLPInference(policy.model)
        self.dist_class, self.sample = policy.dist_class, sample_numpy
        self.rng = np.random.default_rng(seed)
        self.chunk = np.zeros((CHUNK, num_envs, 4), np.float32)
        self.obs = self.venv.reset(seed=seed)[0]
        self.num_envs = num_envs

    def run(self, total_steps: int) -> Tuple[int, float]:
        from rlfleet.fast.blas import single_threaded_blas

        venv, net, chunk, rng = self.venv, self.net, self.chunk, self.rng
        obs, steps, t = self.obs, 0, 0
        start = time.perf_counter()
        with single_threaded_blas():
            while steps < total_steps:
                chunk[t] = obs
                logits, _ = net(obs, values=False)
                actions, _ = self.sample(self.dist_class, logits, True, rng)
                obs = venv.step(actions)[0]
                steps += self.num_envs
                t += 1
                if t == CHUNK:
                    net.values(chunk.reshape(-1, 4))
                    t = 0
        self.obs = obs
        return steps, time.perf_counter() - start

    def stop(self) -> None:
        self.venv.close()


class VectorWorkerLoop:
    """`RolloutWorker.sample()` with `gym_env_vectorize_mode: "vector_entry_point"`."""

    def __init__(self, num_envs: int, hiddens: Optional[Sequence[int]] = None, seed: int = 0):
        from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
        from rlfleet.config import merge_configs, validate_config
        from rlfleet.env.registry import resolve_env
        from rlfleet.rollout.rollout_worker import RolloutWorker

        overrides = {"env": "CartPole-v1", "num_envs_per_worker": num_envs, "rollout_fragment_length": CHUNK,
                     "seed": seed, "gym_env_vectorize_mode": "vector_entry_point"}
        if hiddens:
            overrides["model"] = {"fcnet_hiddens": list(hiddens)}
        config = merge_configs(DEFAULT_CONFIG, overrides)
        validate_config(config)
        self.worker = RolloutWorker(env_creator=resolve_env("CartPole-v1")[1], policy_class=PPOTorchPolicy,
                                    config=config)
        self.worker.sample()  # warm-up: first reset, buffer allocation
        self.num_envs = num_envs

    def run(self, total_steps: int) -> Tuple[int, float, float]:
        """(env steps, seconds, Python ms per vector step)."""
        perf = self.worker.sampler._perf
        before = dict(perf)
        steps = 0
        start = time.perf_counter()
        while steps < total_steps:
            steps += self.worker.sample().count
        seconds = time.perf_counter() - start
        vector_steps = perf["steps"] - before["steps"]
        outside = (perf["env_wait"] - before["env_wait"]) + (perf["inference"] - before["inference"])
        return steps, seconds, 1000.0 * (seconds - outside) / max(1, vector_steps)

    def calls_per_vector_step(self) -> float:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(2):
            self.worker.sample()
        profiler.disable()
        return pstats.Stats(profiler).total_calls / (2 * CHUNK)

    def stop(self) -> None:
        self.worker.stop()


def _spread(values: List[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def vector_env_table(envs: Sequence[int], hiddens_list: Sequence[Optional[Sequence[int]]], rounds: int,
                     vector_steps: int) -> None:
    """Prints, per model and number of envs, ours / the ceiling and the Python ms per vector step."""
    print(f"CartPole-v1 make_vec (vector_entry_point); median (min-max) of {rounds} interleaved rounds of "
          f"{vector_steps} vector steps; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'model':>10} | {'envs':>5} | {'ceiling steps/s':>25} | {'rlfleet steps/s':>25} | "
          f"{'rlfleet / ceiling':>19} | {'Python ms per vector step':>25} | Python calls per vector step")
    for hiddens in hiddens_list:
        for n in envs:
            ceiling, ours = VectorCeilingLoop(n, hiddens), VectorWorkerLoop(n, hiddens)
            c_rates, o_rates, ratios, python_ms = [], [], [], []
            for _ in range(rounds):
                s, t = ceiling.run(vector_steps * n)
                c_rates.append(s / t)
                s, t, ms = ours.run(vector_steps * n)
                o_rates.append(s / t)
                ratios.append(o_rates[-1] / c_rates[-1])
                python_ms.append(ms)
            calls = ours.calls_per_vector_step()
            ceiling.stop()
            ours.stop()
            label = "default" if not hiddens else str(list(hiddens))
            print(f"{label:>10} | {n:>5} | {_spread(c_rates, '{:,.0f}'):>25} | {_spread(o_rates, '{:,.0f}'):>25} | "
                  f"{_spread(ratios, '{:.2f}'):>19} | {_spread(python_ms, '{:.3f}'):>25} | {calls:.0f}")
