"""PPO's learner against its arithmetic ceiling, and acting through the same model, in one run.

For each model (fully connected [64, 64] and [256, 256] on CartPole; the Nature CNN on
`envpool:Pong-v5`, needs envpool), the benchmark

1. samples one real train batch (`--rows`) and times `learn_on_batch` on it (the PPO epochs and
   minibatches of the config) with the NumPy learner and with torch, each where the plan takes
   it: learner samples/s = rows x epochs / seconds;
2. computes the ceiling: FLOPs per sample from the model's layer sizes (a forward pass is
   2 x in x out per dense layer and 2 x k x k x c_in x c_out x out_h x out_w per conv layer;
   forward + backward = 3 x the forward), divided into the machine's GEMM / conv rate measured
   here at each layer's shape at the minibatch size (NumPy matmul for dense layers; torch conv2d
   for conv layers, forward and both backward products), layer by layer;
3. times acting as the sampler acts (the policy's actor: one call per vector step of
   `--act-rows` observations, the envs of a worker; the chunk's deferred values at its end)
   against the forward pass's own ceiling at that batch size.

One thread throughout (the trainer's default, `num_cpus_for_driver: 1`).

    python benchmarks/learner_ceiling.py [--models fc64 fc256 cnn] [--rows 8192] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List, Tuple

import numpy as np

MODELS = {
    "fc64": ("CartPole-v1", {"model": {"fcnet_hiddens": [64, 64], "vf_share_layers": False}}),
    "fc256": ("CartPole-v1", {"model": {"fcnet_hiddens": [256, 256], "vf_share_layers": False}}),
    "cnn": ("envpool:Pong-v5", {"model": {"conv_filters": [[32, [8, 8], 4, "valid"], [64, [4, 4], 2, "valid"],
                                                           [64, [3, 3], 1, "valid"]],
                                          "post_fcnet_hiddens": [512], "vf_share_layers": True}}),
}


def _layers(policy) -> List[Tuple[str, tuple]]:
    """The model's dense and conv layers as ("dense", (in, out)) / ("conv", (c_in, c_out, k, stride, h, w))."""
    import torch
    from torch import nn

    shape = policy.observation_space.shape
    layers: List[Tuple[str, tuple]] = []
    hooks = []

    def record(module, inputs, output):
        if isinstance(module, nn.Linear):
            layers.append(("dense", (module.in_features, module.out_features)))
        else:
            _, c_in, h, w = inputs[0].shape
            layers.append(("conv", (c_in, module.out_channels, module.kernel_size[0], module.stride[0], h, w)))

    for module in policy.model.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            hooks.append(module.register_forward_hook(record))
    with torch.no_grad():
        obs = torch.zeros((2, *shape), dtype=torch.float32)
        policy.model({"obs": obs}, [], None)
        policy.model.value_function()
    for h in hooks:
        h.remove()
    return layers


def _flops(layer: Tuple[str, tuple]) -> float:
    """Forward FLOPs of one layer for one sample."""
    kind, dims = layer
    if kind == "dense":
        return 2.0 * dims[0] * dims[1]
    c_in, c_out, k, stride, h, w = dims
    out_h, out_w = (h - k) // stride + 1, (w - k) // stride + 1
    return 2.0 * k * k * c_in * c_out * out_h * out_w


def _layer_rate(layer: Tuple[str, tuple], rows: int, backward: bool) -> float:
    """FLOP/s this machine reaches on `layer` with `rows` samples (forward, or forward + backward)."""
    import torch

    kind, dims = layer
    reps = 5
    if kind == "dense":
        a = np.random.rand(rows, dims[0]).astype(np.float32)
        w = np.random.rand(dims[0], dims[1]).astype(np.float32)
        g = np.random.rand(rows, dims[1]).astype(np.float32)
        a @ w  # warm-up
        start = time.perf_counter()
        for _ in range(reps):
            a @ w
            if backward:
                g @ w.T
                a.T @ g
        seconds = (time.perf_counter() - start) / reps
    else:
        c_in, c_out, k, stride, h, w_ = dims
        x = torch.rand(rows, c_in, h, w_, requires_grad=backward)
        conv = torch.nn.Conv2d(c_in, c_out, k, stride)
        conv(x).sum().backward() if backward else conv(x)  # warm-up
        start = time.perf_counter()
        for _ in range(reps):
            y = conv(x)
            if backward:
                y.sum().backward()
        seconds = (time.perf_counter() - start) / reps
    return (3.0 if backward else 1.0) * _flops(layer) * rows / seconds


def ceiling(layers, rows: int, backward: bool) -> float:
    """Samples/s if every layer ran at this machine's measured rate for its shape."""
    seconds_per_sample = sum((3.0 if backward else 1.0) * _flops(l) / _layer_rate(l, rows, backward) for l in layers)
    return 1.0 / seconds_per_sample


def measure(name: str, rows: int, rounds: int, act_rows: int) -> Dict[str, List[float]]:
    import torch

    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.algorithms.ppo.ppo import standardized
    from rlfleet.fast.blas import single_threaded_blas
    from rlfleet.policy.sample_batch import SampleBatch

    env, extra = MODELS[name]
    envs = 8 if name == "cnn" else 64
    minibatch, epochs = (256 if name == "cnn" else 1024), 4
    config = dict(extra, env=env, seed=0, num_workers=0, num_envs_per_worker=envs,
                  rollout_fragment_length=rows // envs, train_batch_size=rows, sgd_minibatch_size=minibatch,
                  num_sgd_iter=epochs)
    if name != "cnn":
        config["gym_env_vectorize_mode"] = "vector_entry_point"
    trainer = PPOTrainer(config=config)
    torch.set_num_threads(1)
    policy = trainer.get_policy()
    batch = trainer.workers.local_worker().sample()
    batch[SampleBatch.ADVANTAGES] = standardized(batch[SampleBatch.ADVANTAGES])
    layers = _layers(policy)
    out: Dict[str, List[float]] = {"ceiling": [], "act ceiling": []}
    weights = policy.get_weights()
    obs = batch[SampleBatch.OBS][:act_rows]
    for _ in range(rounds):  # interleaved: the machine's other load hits every figure alike
        with single_threaded_blas():
            out["ceiling"].append(ceiling(layers, minibatch, True))
            out["act ceiling"].append(ceiling(layers, act_rows, False))
        for path in ("numpy", "torch"):
            policy.config["fast_path"] = "auto" if path == "numpy" else "off"
            policy.refresh_fast_plan()
            if path == "numpy" and policy.fast_plan.learner != "numpy":
                continue  # the plan keeps torch for this model: no NumPy learner to time
            policy.set_weights(weights)
            start = time.perf_counter()
            policy.multi_epoch_sgd(batch.copy(), epochs, minibatch)
            out.setdefault(f"learner ({path})", []).append(batch.count * epochs / (time.perf_counter() - start))
            # As the sampler acts: one actor per chunk, one `act` per vector step, `finish` at its end.
            start = time.perf_counter()
            with single_threaded_blas():
                actor = policy.actor(True, 0, steps=20, num_envs=len(obs))
                for _ in range(20):
                    actor.act(obs.copy())
                actor.finish()
            out.setdefault(f"acting ({path})", []).append(20 * len(obs) / (time.perf_counter() - start))
    trainer.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--rows", type=int, default=8192, help="train batch rows (the CNN: a quarter)")
    parser.add_argument("--act-rows", type=int, default=8, help="observations per acting call")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"PPO learner and acting vs their arithmetic ceilings, 1 thread; median (min-max) of {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'model':>6} | {'what':>16} | {'samples/s':>28} | share of its ceiling")
    for name in args.models:
        rows = args.rows // 4 if name == "cnn" else args.rows
        figures = measure(name, rows, args.rounds, args.act_rows)
        for key, values in figures.items():
            base = figures["act ceiling" if key.startswith("act") else "ceiling"]
            share = [v / c for v, c in zip(values, base)]
            print(f"{name:>6} | {key:>16} | {_spread(values, '{:,.0f}'):>28} | {_spread(share, '{:.2f}')}")


def _spread(values: List[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


if __name__ == "__main__":
    main()
