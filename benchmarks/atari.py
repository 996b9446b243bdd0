"""Atari end to end: PPO (or APPO / IMPALA) on `envpool:Pong-v5` from the tuned examples.

Throughput (default): frames/s of training (sampling and learning, 4 frames per agent step) of
rlfleet's PPO with `tuned_examples/ppo/pong-ppo-envpool.yaml` against a CleanRL-style PPO
written here (one file, plain torch, the same EnvPool settings, Nature CNN and hyperparameters:
8 envs, 128-step rollouts, GAE, 4 epochs of 4 minibatches, clipped surrogate and value loss,
Adam eps 1e-5, gradient norm 0.5), alternating `--rounds` timed runs of `--iters` iterations in
one process, one torch thread each. Needs `pip install envpool`.

    python benchmarks/atari.py [--iters 4] [--rounds 3]

Learning curve: `--curve FRAMES` trains the tuned example (`--algo PPO|APPO|IMPALA`) for that
many frames and writes the curve (frames, seconds, mean return of the last 100 episodes) to
`--out` (CSV) and a PNG beside it:

    python benchmarks/atari.py --curve 10000000 --algo PPO --out pong_ppo.csv
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path
from typing import List

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"PPO": "ppo/pong-ppo-envpool.yaml", "APPO": "appo/pong-appo-envpool.yaml",
            "IMPALA": "impala/pong-impala-envpool.yaml"}
FRAME_SKIP = 4


def tuned_trainer(algo: str, overrides: dict = None):
    import yaml

    from rlfleet.registry import get_trainer_class

    (spec,) = yaml.safe_load((ROOT / "tuned_examples" / EXAMPLES[algo]).read_text()).values()
    config = dict(spec["config"], env=spec["env"], **(overrides or {}))
    return get_trainer_class(spec["run"])(config=config)


class CleanRLStylePPO:
    """PPO for EnvPool Atari in the style of CleanRL's single-file scripts (our own code)."""

    def __init__(self, seed: int = 0, num_envs: int = 8, steps: int = 128):
        import envpool
        import torch
        from torch import nn

        self.envs = envpool.make("Pong-v5", env_type="gymnasium", num_envs=num_envs, seed=seed, episodic_life=True,
                                 reward_clip=True, num_threads=1)
        n_actions = self.envs.action_space.n

        def layer(module, std=np.sqrt(2)):
            nn.init.orthogonal_(module.weight, std)
            nn.init.constant_(module.bias, 0.0)
            return module

        self.trunk = nn.Sequential(layer(nn.Conv2d(4, 32, 8, stride=4)), nn.ReLU(),
                                   layer(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
                                   layer(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(), nn.Flatten(),
                                   layer(nn.Linear(3136, 512)), nn.ReLU())
        self.actor, self.critic = layer(nn.Linear(512, n_actions), 0.01), layer(nn.Linear(512, 1), 1.0)
        params = [*self.trunk.parameters(), *self.actor.parameters(), *self.critic.parameters()]
        self.params, self.opt = params, torch.optim.Adam(params, lr=2.5e-4, eps=1e-5)
        self.torch, self.num_envs, self.steps = torch, num_envs, steps
        self.obs = torch.as_tensor(self.envs.reset()[0])

    def _heads(self, obs):
        hidden = self.trunk(obs.float() / 255.0)
        return self.actor(hidden), self.critic(hidden).squeeze(-1)

    def iteration(self) -> int:
        """One rollout of `steps` x `num_envs` and its update; returns agent steps."""
        torch, T, N = self.torch, self.steps, self.num_envs
        obs_buf = torch.zeros((T, N, 4, 84, 84), dtype=torch.uint8)
        act_buf, logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((T, N)) for _ in range(5))
        for t in range(T):
            obs_buf[t] = self.obs
            with torch.no_grad():
                logits, value = self._heads(self.obs)
                dist = torch.distributions.Categorical(logits=logits)
                action = dist.sample()
            next_obs, reward, term, trunc, _ = self.envs.step(action.numpy())
            act_buf[t], logp_buf[t], val_buf[t] = action, dist.log_prob(action), value
            rew_buf[t], done_buf[t] = torch.as_tensor(reward), torch.as_tensor(term | trunc, dtype=torch.float32)
            self.obs = torch.as_tensor(next_obs)
        with torch.no_grad():
            next_value = self._heads(self.obs)[1]
        adv, last = torch.zeros((T, N)), torch.zeros(N)
        for t in reversed(range(T)):
            nv = next_value if t == T - 1 else val_buf[t + 1]
            not_done = 1.0 - done_buf[t]
            delta = rew_buf[t] + 0.99 * nv * not_done - val_buf[t]
            last = delta + 0.99 * 0.95 * not_done * last
            adv[t] = last
        returns = adv + val_buf
        b_obs, b_act, b_logp = obs_buf.reshape(-1, 4, 84, 84), act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret, b_val = adv.reshape(-1), returns.reshape(-1), val_buf.reshape(-1)
        rows = T * N
        for _ in range(4):
            order = torch.randperm(rows)
            for start in range(0, rows, rows // 4):
                mb = order[start:start + rows // 4]
                logits, value = self._heads(b_obs[mb])
                dist = torch.distributions.Categorical(logits=logits)
                ratio = (dist.log_prob(b_act[mb]) - b_logp[mb]).exp()
                a = b_adv[mb]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(0.9, 1.1)).mean()
                v_clipped = b_val[mb] + (value - b_val[mb]).clamp(-0.1, 0.1)
                v_loss = 0.5 * torch.max((value - b_ret[mb]) ** 2, (v_clipped - b_ret[mb]) ** 2).mean()
                loss = pg - 0.01 * dist.entropy().mean() + 0.5 * v_loss
                self.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, 0.5)
                self.opt.step()
        return rows


def throughput(iters: int, rounds: int) -> None:
    import torch

    ours = tuned_trainer("PPO")
    theirs = CleanRLStylePPO()
    torch.set_num_threads(1)
    ours.train()  # warm-up: first reset, buffers
    theirs.iteration()
    rates = {"rlfleet PPO": [], "CleanRL-style PPO": []}
    for _ in range(rounds):  # alternating: the machine's other load hits both alike
        start, steps = time.perf_counter(), 0
        for _ in range(iters):
            steps += ours.train()["timesteps_this_iter"]
        rates["rlfleet PPO"].append(FRAME_SKIP * steps / (time.perf_counter() - start))
        start, steps = time.perf_counter(), 0
        for _ in range(iters):
            steps += theirs.iteration()
        rates["CleanRL-style PPO"].append(FRAME_SKIP * steps / (time.perf_counter() - start))
    ours.stop()
    ratios = [a / b for a, b in zip(rates["rlfleet PPO"], rates["CleanRL-style PPO"])]
    print(f"envpool:Pong-v5, 8 envs, Nature CNN, 1 torch thread; {rounds} alternating rounds of {iters} iterations "
          f"(1024 agent steps each); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, values in rates.items():
        print(f"{name:>18}: {statistics.median(values):8,.0f} frames/s ({min(values):,.0f}-{max(values):,.0f})")
    print(f"{'rlfleet / CleanRL':>18}: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


def curve(algo: str, frames: int, out: Path) -> None:
    trainer = tuned_trainer(algo)
    start = time.perf_counter()
    rows: List[tuple] = []
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "seconds", "episode_reward_mean"])
        while True:
            result = trainer.train()
            row = (FRAME_SKIP * result["timesteps_total"], round(time.perf_counter() - start, 1),
                   result["episode_reward_mean"])
            rows.append(row)
            writer.writerow(row)
            f.flush()
            if row[0] >= frames:
                break
    trainer.stop()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r[0] / 1e6 for r in rows], [r[2] for r in rows])
    ax.set_xlabel("frames (millions)")
    ax.set_ylabel("mean return (last 100 episodes)")
    ax.set_title(f"{algo} on envpool:Pong-v5 ({EXAMPLES[algo]})")
    fig.savefig(out.with_suffix(".png"), dpi=100, bbox_inches="tight")
    print(f"{out} and {out.with_suffix('.png')}: {len(rows)} iterations, last {rows[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=4, help="iterations per timed run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--curve", type=int, default=None, metavar="FRAMES", help="train for FRAMES, write the curve")
    parser.add_argument("--algo", default="PPO", choices=list(EXAMPLES))
    parser.add_argument("--out", type=Path, default=Path("pong_curve.csv"))
    args = parser.parse_args()
    if args.curve:
        curve(args.algo, args.curve, args.out)
    else:
        throughput(args.iters, args.rounds)


if __name__ == "__main__":
    main()
