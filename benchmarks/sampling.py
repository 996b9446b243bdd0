"""Sampling throughput: `RolloutWorker.sample()` vs a plain Gymnasium loop (the ceiling).

Both step the same CartPole-v1 envs in this one run; the figure that matters is the
ratio (ours / ceiling), which does not depend on how fast this machine is.

    python benchmarks/sampling.py [--steps 40000] [--envs 1 8] [--ceiling]

`--ceiling` adds the arithmetic ceiling of a sampler with the default model: the plain loop
plus that model's own NumPy forward passes (`PlainLoopWithModel`), and ours as a share of it.

`--envpool` compares, for 8 envs (or `--envs`), `env: "envpool:CartPole-v1"` (one EnvPool
stepped as a batch, rlfleet.env.envpool_env) with the Gymnasium envs, both through
`RolloutWorker.sample()`, and EnvPool's own raw loops (lockstep; two half-pools pipelined;
async mode, half the envs per batch: what a sampler could reach from EnvPool with random
actions and nothing stored), each against the plain loop; other
ids (Gymnasium's and EnvPool's name, e.g. HalfCheetah-v4) as arguments:

    python benchmarks/sampling.py --envpool [CartPole-v1 HalfCheetah-v4] [--envs 8] [--steps 10000] [--rounds 5]
                                  [--hiddens 64 64]

`--vector-env` measures `RolloutWorker.sample()` on Gymnasium's batched CartPole (`make_vec`,
`gym_env_vectorize_mode: "vector_entry_point"`) against that vector env's bare loop plus the
model's forward passes, for the default model and [64, 64] (benchmarks/vector_env_sampling.py):

    python benchmarks/sampling.py --vector-env [--envs 64 256 1024] [--rounds 3] [--steps 400]

`--workers 0 1 2` measures instead the total env steps/s of the worker set: 0 is the
single process (the local worker samples), N >= 1 is N remote workers on a local Ray
(one CPU each, `--envs` envs per worker, first value), all sampling in parallel:

    python benchmarks/sampling.py --workers 0 1 2 [--envs 8] [--steps 40000] [--rounds 5] [--ceiling]

With `--ceiling`, the same rounds also time the arithmetic ceiling's loop (below) in 1 and in N
processes at once, no Ray: N of them against one is this machine's own N-core scaling, the most
N remote workers can reach against one process.

"CPU share" is the CPU time the busiest sampling process got per second of the run (1.0: a
whole core): on a machine with other load, N workers reach N times one process only when
each still gets a core. `--before` adds, for each N >= 1, the same worker set as it sampled before its cuts: one Ray
call per round (`WorkerSet.batched_rounds = False`).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import List, Tuple

import gymnasium as gym
import numpy as np


class PlainGymLoop:
    """The ceiling: a bare loop over CartPole-v1 envs (or `env_id`'s), random actions, manual
    reset, nothing stored."""

    def __init__(self, num_envs: int, seed: int = 0, env_id: str = "CartPole-v1"):
        self.envs = [gym.make(env_id) for _ in range(num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)
            env.action_space.seed(seed + i)
        self.rng = np.random.default_rng(seed)
        self.random_actions = _random_actions(self.envs[0].action_space, num_envs, self.rng)

    def run(self, total_steps: int) -> Tuple[int, float]:
        """`(env steps, seconds)` for at least `total_steps` env steps."""
        envs, num_envs = self.envs, len(self.envs)
        random_actions = self.random_actions
        steps = 0
        start = time.perf_counter()
        while steps < total_steps:
            actions = random_actions()
            for env, a in zip(envs, actions):
                _, _, term, trunc, _ = env.step(a)
                if term or trunc:
                    env.reset()
            steps += num_envs
        return steps, time.perf_counter() - start

    def stop(self) -> None:
        pass


class PlainLoopWithModel(PlainGymLoop):
    """The arithmetic ceiling of a sampler: the plain loop plus the default PPO model's own
    forward passes, as NumPy does them: per step one pass over the envs' observations for
    the actions (a Categorical draw), per 200-step chunk one pass over the chunk's stored
    observations for the values, and the observations copied into a preallocated buffer.
    Nothing else (no trajectories, episodes, checks or metrics)."""

    def __init__(self, num_envs: int, seed: int = 0, env_id: str = "CartPole-v1", hiddens=None):
        super().__init__(num_envs, seed, env_id)
        from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
        from rlfleet.config import merge_configs
        from rlfleet.fast.distributions import sample_numpy
        from rlfleet.fast.inference import NumpyMLPInference

        env = self.envs[0]
        config = merge_configs(DEFAULT_CONFIG, {"model": {"fcnet_hiddens": list(hiddens)}} if hiddens else {})
        policy = PPOTorchPolicy(env.observation_space, env.action_space, config)
        self.net = NumpyMLPInference(policy.model)
        self.dist_class, self.sample = policy.dist_class, sample_numpy
        self.chunk = np.zeros((200, num_envs, *env.observation_space.shape), np.float32)
        self.obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(self.envs)]).astype(np.float32)

    def run(self, total_steps: int) -> Tuple[int, float]:
        from rlfleet.fast.blas import single_threaded_blas

        envs, net, chunk, rng = self.envs, self.net, self.chunk, self.rng
        obs, steps, t = self.obs, 0, 0
        start = time.perf_counter()
        with single_threaded_blas():
            while steps < total_steps:
                chunk[t] = obs
                logits, _ = net(obs, values=False)
                actions, _ = self.sample(self.dist_class, logits, True, rng)
                for i, (env, a) in enumerate(zip(envs, actions.tolist())):
                    o, _, term, trunc, _ = env.step(a)
                    obs[i] = env.reset()[0] if term or trunc else o
                steps += len(envs)
                t += 1
                if t == len(chunk):
                    net.values(chunk.reshape(-1, chunk.shape[-1]))
                    t = 0
        return steps, time.perf_counter() - start


def _random_actions(space: gym.Space, num_envs: int, rng: np.random.Generator):
    """A function returning one random action per env (Discrete: Python ints, as agents pass)."""
    if isinstance(space, gym.spaces.Discrete):
        return lambda: rng.integers(0, int(space.n), size=num_envs).tolist()
    return lambda: rng.uniform(space.low, space.high, size=(num_envs, *space.shape))


class EnvPoolRawLoop:
    """EnvPool's own loop: one batched `step` of random actions, EnvPool's autoreset, nothing
    stored (for reference: what the C++ envs give before any sampler work)."""

    def __init__(self, num_envs: int, seed: int = 0, env_id: str = "CartPole-v1"):
        import warnings

        import envpool

        with warnings.catch_warnings():  # EnvPool's float32 Box from float64 bounds
            warnings.simplefilter("ignore")
            # One C++ thread, as rlfleet's default for a worker reserving one CPU.
            self.pool = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed, num_threads=1)
            space = self.pool.action_space
            self.pool.reset()
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)
        self.random_actions = _random_actions(space, num_envs, self.rng)

    def run(self, total_steps: int) -> Tuple[int, float]:
        pool, num_envs, random_actions = self.pool, self.num_envs, self.random_actions
        steps = 0
        start = time.perf_counter()
        while steps < total_steps:
            pool.step(np.asarray(random_actions()))
            steps += num_envs
        return steps, time.perf_counter() - start

    def stop(self) -> None:
        self.pool.close()


class EnvPoolHalvesLoop(EnvPoolRawLoop):
    """EnvPool's loop over two half-pools, pipelined: while one half steps in its C++ thread
    (`send`), the other's results are read and its actions sent. Lockstep within each half,
    so a sampler built this way would still repeat with a seed. Random actions, nothing
    stored: the most a two-lane sampler could get from EnvPool."""

    def __init__(self, num_envs: int, seed: int = 0, env_id: str = "CartPole-v1"):
        import warnings

        import envpool

        half = num_envs // 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.pools = [envpool.make(env_id, env_type="gymnasium", num_envs=half, seed=seed + k * half,
                                       num_threads=1) for k in range(2)]
            for pool in self.pools:
                pool.reset()
        self.num_envs, self.ids = 2 * half, np.arange(half, dtype=np.int32)
        self.rng = np.random.default_rng(seed)
        self.random_actions = _random_actions(self.pools[0].action_space, half, self.rng)

    def run(self, total_steps: int) -> Tuple[int, float]:
        (a, b), ids, random_actions = self.pools, self.ids, self.random_actions
        steps = 0
        start = time.perf_counter()
        a.send(np.asarray(random_actions()), ids)
        while steps < total_steps:
            b.send(np.asarray(random_actions()), ids)
            a.recv()
            a.send(np.asarray(random_actions()), ids)
            b.recv()
            steps += self.num_envs
        a.recv()
        return steps, time.perf_counter() - start

    def stop(self) -> None:
        for pool in self.pools:
            pool.close()


class EnvPoolAsyncLoop(EnvPoolRawLoop):
    """EnvPool's async mode: `recv` hands back whichever half of the envs finished first
    (`batch_size` num_envs / 2) and their next actions go out at once. The env ids of each
    batch depend on timing: a sampler built this way would not repeat with a seed."""

    def __init__(self, num_envs: int, seed: int = 0, env_id: str = "CartPole-v1"):
        import warnings

        import envpool

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.pool = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs // 2,
                                     seed=seed, num_threads=1)
            space = self.pool.action_space
            self.pool.async_reset()
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)
        self.random_actions = _random_actions(space, num_envs // 2, self.rng)

    def run(self, total_steps: int) -> Tuple[int, float]:
        pool, random_actions = self.pool, self.random_actions
        steps = 0
        start = time.perf_counter()
        while steps < total_steps:
            info = pool.recv()[-1]
            ids = info["env_id"]
            pool.send(np.asarray(random_actions()), ids)
            steps += len(ids)
        return steps, time.perf_counter() - start


class WorkerLoop:
    """`RolloutWorker.sample()` on CartPole-v1 (or `env`) with the default PPO model.

    Args:
        env: the `env` config value ("CartPole-v1": Gymnasium envs stepped in a Python loop;
            "envpool:CartPole-v1": one EnvPool stepped as a batch).
    """

    def __init__(self, num_envs: int, seed: int = 0, env: str = "CartPole-v1", hiddens=None):
        from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
        from rlfleet.config import merge_configs, validate_config
        from rlfleet.env.registry import resolve_env
        from rlfleet.rollout.rollout_worker import RolloutWorker

        overrides = {"env": env, "num_envs_per_worker": num_envs, "rollout_fragment_length": 200, "seed": seed}
        if hiddens is not None:
            overrides["model"] = {"fcnet_hiddens": list(hiddens)}
        config = merge_configs(DEFAULT_CONFIG, overrides)
        validate_config(config)
        _, creator = resolve_env(env)
        self.worker = RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config)
        self.worker.sample()  # warm-up: first reset, buffer allocation

    def run(self, total_steps: int) -> Tuple[int, float]:
        steps = 0
        start = time.perf_counter()
        while steps < total_steps:
            steps += self.worker.sample().count
        return steps, time.perf_counter() - start

    def stop(self) -> None:
        self.worker.stop()


def envpool_table(env_id: str, num_envs: int, total_steps: int, rounds: int, hiddens=None) -> None:
    """`--envpool`: RolloutWorker.sample() on "envpool:<env_id>" and on the Gymnasium envs,
    and EnvPool's raw loop, each as a ratio to the plain Gymnasium loop of the same round."""
    loops = {"rlfleet, gymnasium envs": WorkerLoop(num_envs, env=env_id, hiddens=hiddens),
             "rlfleet, envpool": WorkerLoop(num_envs, env="envpool:" + env_id, hiddens=hiddens),
             "envpool raw step loop": EnvPoolRawLoop(num_envs, env_id=env_id),
             "envpool raw, 2 halves": EnvPoolHalvesLoop(num_envs, env_id=env_id),
             "envpool raw, async": EnvPoolAsyncLoop(num_envs, env_id=env_id)}
    ceiling = PlainGymLoop(num_envs, env_id=env_id)
    rates: dict = {name: [] for name in loops}
    ratios: dict = {name: [] for name in loops}
    plain: List[float] = []
    for _ in range(rounds):  # interleaved: other load on the machine hits every loop alike
        s, t = ceiling.run(total_steps)
        plain.append(s / t)
        for name, loop in loops.items():
            s, t = loop.run(total_steps)
            rates[name].append(s / t)
            ratios[name].append(rates[name][-1] / plain[-1])
    for loop in loops.values():
        loop.stop()
    print(f"{env_id}, {num_envs} envs, model {hiddens or 'default'}; median of {rounds} interleaved rounds of {total_steps} steps; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'loop':>24} | {'env steps/s (min-max)':>27} | vs plain gym loop, same round (min-max)")
    print(f"{'plain gym loop':>24} | {_spread(plain, '{:,.0f}'):>27} | 1")
    for name in loops:
        print(f"{name:>24} | {_spread(rates[name], '{:,.0f}'):>27} | {_spread(ratios[name], '{:.2f}')}")
    print(f"{'envpool / gymnasium in rlfleet':>24}: "
          f"{_spread([a / b for a, b in zip(ratios['rlfleet, envpool'], ratios['rlfleet, gymnasium envs'])], '{:.2f}')}")


def _spread(values: List[float], fmt: str) -> str:
    """`median (min-max)`."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def make_worker_set(num_workers: int, num_envs: int, seed: int = 0, before: bool = False):
    """A WorkerSet sampling CartPole-v1: the local worker (0) or `num_workers` remote ones."""
    from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
    from rlfleet.algorithms.common.sampling import synchronous_parallel_sample
    from rlfleet.config import merge_configs, validate_config
    from rlfleet.env.registry import resolve_env
    from rlfleet.rollout.worker_set import WorkerSet

    config = merge_configs(DEFAULT_CONFIG, {"env": "CartPole-v1", "num_envs_per_worker": num_envs,
                                            "rollout_fragment_length": 200, "seed": seed,
                                            "num_workers": num_workers})
    validate_config(config)
    _, creator = resolve_env("CartPole-v1")
    workers = WorkerSet(env_creator=creator, policy_class=PPOTorchPolicy, trainer_config=config,
                        num_workers=num_workers)
    if before:
        workers.batched_rounds = False
    synchronous_parallel_sample(workers, 1)  # warm-up: first reset, buffer allocation
    return workers


def _loop_process(conn, num_envs: int, seed: int) -> None:
    """A child process of `ProcessLoops`: runs its loop for the steps it is sent."""
    loop = PlainLoopWithModel(num_envs, seed=seed)
    conn.send("ready")
    for steps in iter(conn.recv, None):
        conn.send(loop.run(steps))


class ProcessLoops:
    """The machine's own scaling: `count` processes, each running the arithmetic ceiling
    (`PlainLoopWithModel`, one core's worth of env steps and forward passes, no Ray, no
    sampler), all started at once. N of them against one says what N cores of this machine give
    when they run together (shared caches, the host's other tenants, clock limits): the most N
    remote workers can reach."""

    def __init__(self, count: int, num_envs: int):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")  # the parent has torch's thread pools: no fork
        self.pipes, self.procs = [], []
        for i in range(count):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_loop_process, args=(child, num_envs, 1000 * i), daemon=True)
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)
        for pipe in self.pipes:
            pipe.recv()

    def rate(self, total_steps: int) -> float:
        """Total env steps/s with the processes sharing `total_steps`."""
        start = time.perf_counter()
        for pipe in self.pipes:
            pipe.send(-(-total_steps // len(self.pipes)))
        steps = sum(pipe.recv()[0] for pipe in self.pipes)
        return steps / (time.perf_counter() - start)

    def stop(self) -> None:
        for pipe, proc in zip(self.pipes, self.procs):
            pipe.send(None)
            proc.join(timeout=10)


def worker_set_rate(workers, total_steps: int) -> Tuple[float, float]:
    """Total env steps/s of `synchronous_parallel_sample`, as in training, and the CPU share
    the busiest sampling process got meanwhile (1.0: a whole core; below it, the machine's
    other load took the rest)."""
    from rlfleet.algorithms.common.sampling import synchronous_parallel_sample

    def cpu() -> List[float]:  # read outside the timed window
        if workers.num_remote_workers():
            return workers.foreach_worker(lambda w: __import__("time").process_time())[1:]
        return [time.process_time()]

    before = cpu()
    start = time.perf_counter()
    steps = synchronous_parallel_sample(workers, total_steps).count
    seconds = time.perf_counter() - start
    share = max(b - a for a, b in zip(before, cpu())) / seconds
    return steps / seconds, share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10000, help="env steps per timed run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (the median ratio is reported)")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="worker-set mode: numbers of remote workers to compare (0: single process)")
    parser.add_argument("--before", action="store_true",
                        help="worker-set mode: also measure the worker sets as before their cuts")
    parser.add_argument("--envpool", nargs="*", metavar="ID", default=None,
                        help="env: 'envpool:ID' vs the Gymnasium envs of ID, and EnvPool's raw loop "
                             "(default ID CartPole-v1; needs `pip install envpool`; --envs default 8)")
    parser.add_argument("--hiddens", type=int, nargs="+", default=None, metavar="H",
                        help="--envpool: the model's fcnet_hiddens (default: PPO's default model)")
    parser.add_argument("--ceiling", action="store_true",
                        help="also the arithmetic ceiling: the plain loop plus the model's own forward passes; "
                             "with --workers, that loop in N processes at once (the machine's own scaling)")
    parser.add_argument("--vector-env", action="store_true",
                        help="a Gymnasium batched vector env against its ceiling (--steps: vector steps per round, "
                             "default 400; --envs default 64 256 1024; --hiddens: one model instead of both)")
    args = parser.parse_args()
    if args.vector_env:
        from vector_env_sampling import vector_env_table

        envs = args.envs if args.envs != [1, 8] else [64, 256, 1024]
        models = [args.hiddens] if args.hiddens else [None, [64, 64]]
        vector_env_table(envs, models, args.rounds, args.steps if args.steps != 10000 else 400)
        return
    if args.envpool is not None:
        for env_id in args.envpool or ["CartPole-v1"]:
            for n in (args.envs if args.envs != [1, 8] else [8]):
                envpool_table(env_id, n, args.steps, args.rounds, args.hiddens)
        return
    if args.workers is not None:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        from rlfleet.utils.ray_utils import init_ray

        num_envs = args.envs[0] if args.envs != [1, 8] else 8
        settings = [str(n) for n in args.workers]
        if args.before:
            settings += [f"{n} (before)" for n in args.workers if n > 0]
        if any(args.workers):  # all sets stay up, idle while others run
            init_ray(num_cpus=sum(args.workers) * (2 if args.before else 1))
        sets = {name: make_worker_set(int(name.split()[0]), num_envs, before="before" in name)
                for name in settings}
        if args.ceiling:  # the ceiling loop in 1 and in each N processes, timed in the same rounds
            for n in sorted({1, *(w for w in args.workers if w > 0)}):
                settings.append(f"{n} x ceiling")
                sets[settings[-1]] = ProcessLoops(n, num_envs)
        # Interleaved rounds: other load on the machine hits every setting alike. Each round's
        # rates are compared with the same round's single process.
        rates: dict = {name: [] for name in settings}
        shares: dict = {name: [] for name in settings}
        for _ in range(args.rounds):
            for n, workers in sets.items():
                if isinstance(workers, ProcessLoops):
                    rate, share = workers.rate(args.steps), float("nan")
                else:
                    rate, share = worker_set_rate(workers, args.steps)
                rates[n].append(rate)
                shares[n].append(share)
        for workers in sets.values():
            workers.stop()
        print(f"CartPole-v1, {num_envs} envs per worker, {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f}; median of {args.rounds} interleaved rounds of {args.steps} steps")
        print(f"{'workers':>17} | {'total envs':>10} | {'env steps/s':>11} | {'CPU share':>9} | "
              "vs single process (min-max)")
        single = rates.get("0")
        for n in settings:
            if "ceiling" in n:  # against one process of the same loop
                single = rates["1 x ceiling"]
            if single:
                ratios = [r / s for r, s in zip(rates[n], single)]
                ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            else:
                ratio = "-"
            print(f"{n:>17} | {num_envs * max(1, int(n.split()[0])):>10} | {statistics.median(rates[n]):>11,.0f} | "
                  f"{statistics.median(shares[n]):>9.2f} | {ratio}")
        if args.ceiling and "0" in rates:  # each round's N-worker scaling over the machine's own
            for n in (w for w in args.workers if w > 0):
                of = [(w / s) / (c / c1) for w, s, c, c1 in
                      zip(rates[str(n)], rates["0"], rates[f"{n} x ceiling"], rates["1 x ceiling"])]
                print(f"{n} workers' scaling / the machine's {n}-process scaling: {statistics.median(of):.2f} "
                      f"({min(of):.2f}-{max(of):.2f})")
        return
    print(f"median of {args.rounds} interleaved rounds of {args.steps} steps each; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'envs/worker':>11} | {'plain gym steps/s':>17} | {'rlfleet steps/s':>15} | ratio (min-max)"
          + (" | ceiling steps/s | rlfleet / ceiling (min-max)" if args.ceiling else ""))
    for n in args.envs:
        ceiling, ours = PlainGymLoop(n), WorkerLoop(n)
        model_loop = PlainLoopWithModel(n) if args.ceiling else None
        ratios, mine, theirs, to_model, model_rates = [], [], [], [], []
        for _ in range(args.rounds):  # interleaved: other load hits all alike
            s1, t1 = ceiling.run(args.steps)
            s2, t2 = ours.run(args.steps)
            theirs.append(s1 / t1)
            mine.append(s2 / t2)
            ratios.append(mine[-1] / theirs[-1])
            if model_loop is not None:
                s3, t3 = model_loop.run(args.steps)
                model_rates.append(s3 / t3)
                to_model.append(mine[-1] / model_rates[-1])
        ours.stop()
        line = (f"{n:>11} | {statistics.median(theirs):>17,.0f} | {statistics.median(mine):>15,.0f} | "
                f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
        if model_loop is not None:
            line += (f" | {statistics.median(model_rates):>15,.0f} | {statistics.median(to_model):.3f} "
                     f"({min(to_model):.3f}-{max(to_model):.3f})")
        print(line)

if __name__ == "__main__":
    main()
