"""PPO's learner against its arithmetic ceiling, and acting through the same model, in one run.

For each model (fully connected [64, 64] and [256, 256] on CartPole; the Nature CNN on
`envpool:Pong-v5`, needs envpool), the benchmark

1. samples one real train batch (`--rows`) and times `learn_on_batch` on it (the PPO epochs and
   minibatches of the config) with the NumPy learner and with torch, each where the plan takes
   it: learner samples/s = rows x epochs / seconds;
2. computes the ceiling: the sum over the model's layers of the time this machine takes for
   that layer's arithmetic at the minibatch size, each timed alone at its shape (NumPy matmul
   for dense layers, torch conv2d for conv layers in the memory layout the model gives them;
   the forward product and the backward ones a
   learner computes: the weight gradient, and the input gradient except for the layers that
   read the observations; the best of 5 repetitions after a warm-up);
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


def _layers(policy) -> List[Tuple[str, tuple, bool]]:
    """The model's dense and conv layers as ("dense", (in, out), input_grad) / ("conv", (c_in,
    c_out, k, stride, h, w, channels_last), input_grad); `input_grad` is False for a layer that
    reads the observations (a learner computes no gradient for its input)."""
    import torch
    from torch import nn

    shape = policy.observation_space.shape
    layers: List[Tuple[str, tuple, bool]] = []
    hooks = []

    def record(module, inputs, output):
        input_grad = inputs[0].requires_grad  # False where no parameter lies before this layer
        if isinstance(module, nn.Linear):
            layers.append(("dense", (module.in_features, module.out_features), input_grad))
        else:
            # The layout the model feeds it: torch's conv is about twice as fast on channels-last
            # input, which the vision nets' [B, H, W, C] -> [B, C, H, W] permute gives.
            _, c_in, h, w = inputs[0].shape
            channels_last = inputs[0].is_contiguous(memory_format=torch.channels_last)
            layers.append(("conv", (c_in, module.out_channels, module.kernel_size[0], module.stride[0], h, w,
                                    channels_last), input_grad))

    for module in policy.model.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            hooks.append(module.register_forward_hook(record))
    obs = torch.zeros((2, *shape), dtype=torch.float32)  # with autograd on: `input_grad` reads it
    policy.model({"obs": obs}, [], None)
    policy.model.value_function()
    for h in hooks:
        h.remove()
    return layers


def _flops(layer: Tuple[str, tuple, bool]) -> float:
    """Forward FLOPs of one layer for one sample."""
    kind, dims, _ = layer
    if kind == "dense":
        return 2.0 * dims[0] * dims[1]
    c_in, c_out, k, stride, h, w = dims[:6]
    out_h, out_w = (h - k) // stride + 1, (w - k) // stride + 1
    return 2.0 * k * k * c_in * c_out * out_h * out_w


def _layer_seconds(layer: Tuple[str, tuple, bool], rows: int, backward: bool) -> float:
    """Seconds per sample this machine takes on `layer` with `rows` samples: forward, or forward
    and the backward products a learner computes (the weight gradient, and the input gradient
    unless the layer reads the observations). The best of a few repetitions after a warm-up:
    the machine's rate at that shape, not one-off allocation."""
    import torch

    kind, dims, input_grad = layer
    times = []
    if kind == "dense":
        a = np.random.rand(rows, dims[0]).astype(np.float32)
        w = np.random.rand(dims[0], dims[1]).astype(np.float32)
        g = np.random.rand(rows, dims[1]).astype(np.float32)
        for _ in range(6):  # the first is the warm-up
            start = time.perf_counter()
            a @ w
            if backward:
                a.T @ g
                if input_grad:
                    g @ w.T
            times.append(time.perf_counter() - start)
    else:
        c_in, c_out, k, stride, h, w_, channels_last = dims
        layout = torch.channels_last if channels_last else torch.contiguous_format
        x = torch.rand(rows, c_in, h, w_).contiguous(memory_format=layout).requires_grad_(backward and input_grad)
        conv = torch.nn.Conv2d(c_in, c_out, k, stride).to(memory_format=layout)
        for _ in range(6):
            start = time.perf_counter()
            y = conv(x)
            if backward:
                y.backward(torch.ones_like(y))
            times.append(time.perf_counter() - start)
    return min(times[1:]) / rows


def ceiling(layers, rows: int, backward: bool) -> float:
    """Samples/s if every layer ran at this machine's measured rate for its shape."""
    return 1.0 / sum(_layer_seconds(layer, rows, backward) for layer in layers)


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
    # Arithmetic per sample: a learner's backward is 2 x the forward (weight and input
    # gradients), 1 x for a layer that reads the observations (no input gradient).
    forward = sum(_flops(layer) for layer in layers)
    learner_flops = sum((3.0 if layer[2] else 2.0) * _flops(layer) for layer in layers)
    print(f"{name:>6} | FLOPs per sample: {forward / 1e6:.2f} M forward, {learner_flops / 1e6:.2f} M forward + backward",
          flush=True)
    out: Dict[str, List[float]] = {"ceiling": [], "act ceiling": []}
    weights = policy.get_weights()
    obs = batch[SampleBatch.OBS][:act_rows]
    for _ in range(rounds):  # interleaved: the machine's other load hits every figure alike
        with single_threaded_blas():
            out["ceiling"].append(ceiling(layers, minibatch, True))
            out["act ceiling"].append(ceiling(layers, act_rows, False))
        out.setdefault("ceiling GFLOP/s", []).append(out["ceiling"][-1] * learner_flops / 1e9)
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
        rate = figures.pop("ceiling GFLOP/s")
        print(f"{name:>6} | {'ceiling GFLOP/s':>16} | {_spread(rate, '{:.1f}'):>28} |")
        for key, values in figures.items():
            base = figures["act ceiling" if key.startswith("act") else "ceiling"]
            share = [v / c for v, c in zip(values, base)]
            print(f"{name:>6} | {key:>16} | {_spread(values, '{:,.0f}'):>28} | {_spread(share, '{:.2f}')}")


def _spread(values: List[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


if __name__ == "__main__":
    main()
