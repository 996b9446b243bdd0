"""Memory models with near-default PPO settings: env steps to a mean return of 150 on CartPole
with the velocities hidden (rlfleet.env.examples.StatelessCartPole).

    python benchmarks/memory_defaults.py [--seeds 0 1 2] [--max-steps 150000]
        [--cases lstm-separate lstm-shared attention-separate] [--vf-loss-coeff 1.0 0.5]

Each case is the new user's config from issue 15: PPO's defaults (one env per worker,
train_batch_size 4000, 30 SGD passes over 128-step minibatches, lambda 1, kl_coeff 0.2,
vf_clip_param 10) plus `lr: 5e-4` and `model: {lstm_cell_size: 64, max_seq_len: 20,
fcnet_hiddens: [64]}` with `use_lstm` (or `use_attention`, attention_dim 64) and
`vf_share_layers` False (PPO's default: a critic with its own memory) or True. Prints, per
case and coefficient, the env steps each seed needed (or "> max" with its last return) and
their median. One torch thread; a run takes minutes of CPU.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

CASES = {
    "lstm-separate": {"use_lstm": True, "vf_share_layers": False},
    "lstm-shared": {"use_lstm": True, "vf_share_layers": True},
    "attention-separate": {"use_attention": True, "attention_dim": 64, "vf_share_layers": False},
}


def steps_to_150(case: str, seed: int, vf_loss_coeff: float, max_steps: int):
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.examples import StatelessCartPole

    model = {"lstm_cell_size": 64, "max_seq_len": 20, "fcnet_hiddens": [64], **CASES[case]}
    trainer = PPOTrainer(env=StatelessCartPole, config={"seed": seed, "lr": 5e-4, "vf_loss_coeff": vf_loss_coeff,
                                                        "model": model})
    try:
        while True:
            result = trainer.train()
            if result["episode_reward_mean"] >= 150 or result["timesteps_total"] >= max_steps:
                return result["timesteps_total"], result["episode_reward_mean"]
    finally:
        trainer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=150_000)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--vf-loss-coeff", type=float, nargs="+", default=[1.0, 0.5])
    args = parser.parse_args()
    torch.set_num_threads(1)
    for case in args.cases:
        for coeff in args.vf_loss_coeff:
            reached = []
            for seed in args.seeds:
                start = time.perf_counter()
                steps, ret = steps_to_150(case, seed, coeff, args.max_steps)
                ok = ret >= 150
                reached.append(steps if ok else float("inf"))
                print(f"{case} vf_loss_coeff={coeff} seed={seed}: "
                      f"{steps if ok else '> ' + str(args.max_steps)} steps (return {ret:.1f}, "
                      f"{time.perf_counter() - start:.0f} s)", flush=True)
            print(f"{case} vf_loss_coeff={coeff}: median {statistics.median(reached)} steps", flush=True)


if __name__ == "__main__":
    main()
