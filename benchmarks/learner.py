"""Learner throughput: the NumPy learners (rlfleet/algorithms/{ppo,sac,ddpg}/numpy_learner.py)
vs the torch path, on the same real train batches, in one run.

    python benchmarks/learner.py [--cases zoo default pendulum sac td3] [--rounds 5] [--threads 1]

Cases: `zoo` is the RL Zoo's CartPole PPO (two [64, 64] tanh towers, 256 rows per
minibatch, 20 passes over 256 rows); `default` is PPO's defaults (two [256, 256] towers,
128-row minibatches, 30 passes over 4000 rows); `pendulum` is a Gaussian policy with the
defaults' nets on 2048 rows. The two paths alternate for `--rounds` timed calls of
`multi_epoch_sgd` on the same batch; prints minibatch updates per second of each and the
median ratio (numpy / torch: higher is faster) with its spread. `sac` is SAC's Zoo Pendulum
case (two [256, 256] ReLU Q-nets and a policy net, 256-row batches): 50 `learn_on_batch`
calls per timed round; `td3` is TD3's defaults on Pendulum ([400, 300] actor and twin
critics). Torch runs on the trainer's thread count (`num_cpus_for_driver`: 1) unless
`--threads N` sets it after each trainer is built; the off-policy NumPy learners run only
with one thread.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

CASES = {
    "zoo": ("CartPole-v1", {"model": {"fcnet_hiddens": [64, 64]}, "num_envs_per_worker": 8,
                            "rollout_fragment_length": 32, "train_batch_size": 256, "sgd_minibatch_size": 256,
                            "num_sgd_iter": 20, "grad_clip": 0.5}),
    "default": ("CartPole-v1", {"num_envs_per_worker": 8, "rollout_fragment_length": 500}),
    "pendulum": ("Pendulum-v1", {"num_envs_per_worker": 8, "rollout_fragment_length": 256,
                                 "train_batch_size": 2048, "sgd_minibatch_size": 128, "num_sgd_iter": 10}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES) + ["sac", "td3"],
                        choices=list(CASES) + ["sac", "td3"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads, set once each trainer is built (0: the trainer's own, 1 by default)")
    args = parser.parse_args()

    import torch

    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.algorithms.ppo.ppo import standardized
    from rlfleet.policy.sample_batch import SampleBatch

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'case':9s} {'numpy updates/s':>16s} {'torch updates/s':>16s}  ratio (min-max)  torch threads")
    for case in args.cases:
        if case in ("sac", "td3"):
            _off_policy(case, args.rounds, args.threads)
            continue
        env, config = CASES[case]
        trainer = PPOTrainer(env=env, config={"num_workers": 0, "seed": 0, **config})
        if args.threads:  # after the trainer, which sets the driver's count
            torch.set_num_threads(args.threads)
        policy = trainer.get_policy()
        cfg = trainer.config
        batch = trainer.workers.local_worker().sample()
        batch[SampleBatch.ADVANTAGES] = standardized(batch[SampleBatch.ADVANTAGES])
        n = batch.count
        size = min(cfg["sgd_minibatch_size"], n)
        updates = cfg["num_sgd_iter"] * sum(1 for s in range(0, n, size) if min(s + size, n) - s >= size // 2 or s == 0)
        weights = policy.get_weights()
        rates = {"numpy": [], "torch": []}
        for _ in range(args.rounds):
            for path in ("numpy", "torch"):
                policy.config["fast_path"] = "auto" if path == "numpy" else "off"
                policy.refresh_fast_plan()
                policy.set_weights(weights)
                start = time.perf_counter()
                policy.multi_epoch_sgd(batch.copy(), cfg["num_sgd_iter"], cfg["sgd_minibatch_size"])
                rates[path].append(updates / (time.perf_counter() - start))
        trainer.stop()
        ratios = [f / t for f, t in zip(rates["numpy"], rates["torch"])]
        print(f"{case:9s} {statistics.median(rates['numpy']):16,.0f} {statistics.median(rates['torch']):16,.0f}  "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})  {torch.get_num_threads()}",
              flush=True)


def _off_policy(case: str, rounds: int, threads: int) -> None:
    import numpy as np
    import torch

    from rlfleet.algorithms.sac import SACTrainer
    from rlfleet.algorithms.td3 import TD3Trainer
    from rlfleet.replay import N_STEPS, PRIO_WEIGHTS

    common = {"num_workers": 0, "seed": 0, "rollout_fragment_length": 1, "learning_starts": 0}
    if case == "sac":
        trainer = SACTrainer(env="Pendulum-v1", config={
            **common, "Q_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
            "policy_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}})
    else:  # TD3's defaults: [400, 300] ReLU actor and twin critics
        trainer = TD3Trainer(env="Pendulum-v1", config=common)
    if threads:  # after the trainer, which sets the driver's count
        torch.set_num_threads(threads)
    policy = trainer.get_policy()
    worker = trainer.workers.local_worker()
    data = worker.sample()
    while data.count < 2048:
        data = data.concat(worker.sample())
    data[N_STEPS] = np.ones(data.count, np.int64)
    data[PRIO_WEIGHTS] = np.ones(data.count, np.float32)
    rng = np.random.default_rng(0)
    rows = [rng.choice(data.count, 256, replace=False) for _ in range(50)]
    batches = [type(data)({k: v[r] for k, v in data.items()}) for r in rows]
    rates = {"numpy": [], "torch": []}
    for _ in range(rounds):
        for path in ("numpy", "torch"):
            policy.config["fast_path"] = "auto" if path == "numpy" else "off"
            policy.refresh_fast_plan()
            start = time.perf_counter()
            for batch in batches:
                policy.learn_on_batch(batch)
            rates[path].append(len(batches) / (time.perf_counter() - start))
    trainer.stop()
    ratios = [f / t for f, t in zip(rates["numpy"], rates["torch"])]
    threads = torch.get_num_threads()
    note = "" if threads == 1 else " (both ran torch's update: the NumPy learner needs 1 thread)"
    print(f"{case:9s} {statistics.median(rates['numpy']):16,.0f} {statistics.median(rates['torch']):16,.0f}  "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})  {threads}{note}", flush=True)


if __name__ == "__main__":
    main()
