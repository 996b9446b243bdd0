"""A NumPy restatement of augmented random search (Mania, Guy & Recht 2018, Algorithm 2),
written from the paper, to hold rlfleet's ARS against.

The policy is a matrix `M` (`[action_dim, obs_dim]`, no bias), started at zero. Per iteration:
draw N directions `delta` (standard normal, the shape of `M`), run one episode with
`M + nu * delta` and one with `M - nu * delta`, keep the b directions with the largest
`max(r+, r-)`, and step

    M <- M + alpha / (b * sigma_R) * sum_k (r+_k - r-_k) * delta_k

(plain SGD) where sigma_R is the standard deviation of the 2b returns used. V2 acts on
`(x - mu) / sigma` with the running mean and standard deviation of every state seen so far
(V1: on `x`). Actions go to the env as computed (MuJoCo clamps its controls itself).

`ars_step` is the update alone (the test holds rlfleet's against it); `run` the whole loop:

    python benchmarks/ars_reference.py --env Swimmer-v5 --seed 0 --steps 2000000

prints the env steps at which the unperturbed policy's return (one episode every
`--eval-every` iterations) first reaches `--target`.
"""
from __future__ import annotations

import argparse
import time
from typing import Callable, Optional, Tuple

import numpy as np


def ars_step(theta: np.ndarray, deltas: np.ndarray, r_plus: np.ndarray, r_minus: np.ndarray, alpha: float,
             top: int) -> np.ndarray:
    """One ARS update (V1-t / V2-t) of `theta` from N directions `deltas` (`[N, *theta.shape]`)
    and their returns `r_plus`, `r_minus` (`[N]`), using the `top` best directions."""
    best = np.maximum(r_plus, r_minus)
    order = np.argsort(-best, kind="stable")[:top]
    sigma_r = np.concatenate([r_plus[order], r_minus[order]]).std()
    weights = r_plus[order] - r_minus[order]
    step = np.tensordot(weights, deltas[order], axes=1)
    return theta + alpha / (top * (sigma_r if sigma_r > 0 else 1.0)) * step


class RunningStat:
    """The running mean and variance of states (Welford), as the paper's V2 keeps them."""

    def __init__(self, shape: Tuple[int, ...]):
        self.n, self.mean, self.m2 = 0, np.zeros(shape), np.zeros(shape)

    def push(self, x: np.ndarray) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean = self.mean + delta / self.n
        self.m2 = self.m2 + delta * (x - self.mean)

    @property
    def std(self) -> np.ndarray:
        var = self.m2 / (self.n - 1) if self.n > 1 else np.ones_like(self.mean)
        std = np.sqrt(var)
        return np.where(std < 1e-8, 1.0, std)


def episode(env, policy: Callable[[np.ndarray], np.ndarray], stats: Optional[RunningStat], horizon: int,
            seed: Optional[int] = None) -> Tuple[float, int]:
    """One episode; pushes every state into `stats` when given. Returns `(return, steps)`."""
    obs, _ = env.reset(seed=seed)
    total, steps = 0.0, 0
    while steps < horizon:
        if stats is not None:
            stats.push(obs)
        obs, reward, terminated, truncated, _ = env.step(policy(obs))
        total += float(reward)
        steps += 1
        if terminated or truncated:
            break
    return total, steps


def run(env_id: str, seed: int, steps: int, alpha: float, nu: float, directions: int, top: int, normalise: bool,
        target: float, eval_every: int, horizon: int = 1000) -> Optional[int]:
    """ARS on `env_id` until `steps` env steps; returns the steps at which an evaluation
    episode first reached `target` (None if none did). Prints one line per evaluation."""
    import gymnasium as gym

    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    theta = np.zeros((act_dim, obs_dim))
    stats = RunningStat((obs_dim,)) if normalise else None
    used, iteration, first_seed = 0, 0, seed
    start = time.time()
    while used < steps:
        # The statistics are frozen within an iteration (the paper updates them after it).
        mu, sd = (stats.mean.copy(), stats.std.copy()) if stats else (np.zeros(obs_dim), np.ones(obs_dim))
        deltas = rng.standard_normal((directions, act_dim, obs_dim))
        returns = np.zeros((directions, 2))
        for k in range(directions):
            for col, sign in enumerate((1.0, -1.0)):
                m = theta + sign * nu * deltas[k]
                returns[k, col], n = episode(env, lambda x, m=m: m @ ((x - mu) / sd), stats, horizon, first_seed)
                first_seed = None
                used += n
        theta = ars_step(theta, deltas, returns[:, 0], returns[:, 1], alpha, top)
        iteration += 1
        if iteration % eval_every == 0:
            ret, n = episode(env, lambda x: theta @ ((x - mu) / sd), None, horizon)
            print(f"iter {iteration:5d}  steps {used:8d}  eval {ret:8.1f}  ({time.time() - start:.0f}s)", flush=True)
            if ret >= target:
                return used
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Swimmer-v5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--alpha", type=float, default=0.02)
    parser.add_argument("--nu", type=float, default=0.01)
    parser.add_argument("--directions", type=int, default=1)
    parser.add_argument("--top", type=int, default=1)
    parser.add_argument("--normalise", action="store_true", help="V2 (state normalisation); default V1")
    parser.add_argument("--target", type=float, default=300.0)
    parser.add_argument("--eval-every", type=int, default=5)
    args = parser.parse_args()
    reached = run(args.env, args.seed, args.steps, args.alpha, args.nu, args.directions, args.top, args.normalise,
                  args.target, args.eval_every)
    print(f"seed {args.seed}: " + (f"reached {args.target} at {reached} env steps" if reached is not None
                                   else f"did not reach {args.target} within {args.steps} env steps"))


if __name__ == "__main__":
    main()
