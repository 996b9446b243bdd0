"""RL-Zoo cases: the RL Baselines3 Zoo's published hyperparameters, translated to rlfleet's
keys, trained on the Zoo's step budget, then scored by greedy evaluation episodes.

    python benchmarks/zoo.py                                  # every case, seeds 0 1 2
    python benchmarks/zoo.py --cases dqn-cartpole --seeds 0 1 2 --out zoo.md
    python benchmarks/zoo.py --list
    python benchmarks/zoo.py --cases td3-pendulum --seeds 0 --config '{"target_network_update_freq": 2}'

Each case is one YAML experiment (`run`, `env`, `stop`, `config`; its
`stop.timesteps_total` is the Zoo's budget): `tuned_examples/{dqn,a2c,ppo}/cartpole-*-zoo.yaml`
(whose first stretches are also CI learning tests) and `benchmarks/zoo_cases/*.yaml` (too long
for CI). `CASES` below pairs each with the Zoo's published score. A run
trains for exactly that many env steps (the last fragment may overshoot by less than one
fragment), then plays `--episodes` (10) episodes with `explore=False` on fresh envs seeded
10_000 + episode and reports their mean return. The result is a Markdown table: score per
seed, the median, env steps and wall time per run.

Key translation (SB3 -> rlfleet), the same for every case:
- `train_freq: F`, `gradient_steps: G`, `batch_size: B` -> `rollout_fragment_length: F`,
  `training_intensity: G * B / F` (replayed steps per sampled step), `train_batch_size: B`.
- DQN `target_update_interval: T` (env steps, counted while sampling) ->
  `target_network_update_freq: T` (sampled env steps, checked after each update, as in
  RLlib). With T below `train_freq`, SB3 copies once right before each phase of
  `gradient_steps` updates, rlfleet right after its first update: the same cadence.
- DQN `exploration_fraction: f` of `n_timesteps: N` -> `epsilon_timesteps: f * N`.
- `net_arch: [h, ...]` -> `model.fcnet_hiddens: [h, ...]` with `fcnet_activation: relu`
  (SB3's default activation for off-policy nets), and for DQN `hiddens: []`,
  `dueling: False`, `double_q: False`, `prioritized_replay: False`, `grad_clip: 10`
  (SB3's DQN has none of the Rainbow options and clips at `max_grad_norm` 10).
- SAC `learning_rate: lr` -> `optimization.{actor,critic,entropy}_learning_rate: lr`;
  SB3's `learning_starts` (100), `batch_size` (256), `tau` and `[256, 256]` nets spelled out
  (rlfleet's SAC defaults follow RLlib: `learning_starts` 1500).
- TD3 `noise_type: normal`, `noise_std: s` -> `exploration_config: {type: GaussianNoise,
  stddev: s, final_scale: 1.0}` (noise in the [-1, 1] action scale, as SB3's), and
  `random_timesteps` = `learning_starts` (SB3 acts uniformly at random until then).
  SB3 Polyak-updates TD3's targets only on the delayed (actor) steps, rlfleet (as the
  reference RLlib) after every update; with one update per env step,
  `target_network_update_freq: 2` (= `policy_delay`) gives SB3's cadence. The case keeps
  the reference's: the two score the same (seeds 0, 1: -111.0, -109.9 vs -110.1, -110.5).
- SAC's Adam epsilon is 1e-7 here (the reference's), 1e-8 in SB3: `optimizer: {eps: 1e-8}`.
  SB3 also steps the critic before computing the actor loss, rlfleet computes all three
  losses from one forward pass. The case keeps rlfleet's defaults: with eps 1e-8 seed 0
  scores -110.0 (vs -112.2).
- TD3 `noise_type: ornstein-uhlenbeck`, `noise_std: s` (SB3's OU noise: theta 0.15, dt 1e-2,
  `x += theta * dt * (0 - x) + s * sqrt(dt) * N(0, 1)`, added to the [-1, 1] action) ->
  `exploration_config: {type: OrnsteinUhlenbeckNoise, ou_theta: 0.15 * dt, ou_sigma: s *
  sqrt(dt), ou_base_scale: 0.5, initial_scale: 1, final_scale: 1}` (rlfleet adds
  `ou_base_scale * x * (high - low)` in the policy's [-1, 1] action scale: base 0.5 adds x
  itself), and `random_timesteps` = `learning_starts`. SB3 resets x to 0 at each episode end, rlfleet keeps it running (per sub-env).
- On-policy (A2C, PPO): `n_envs: E`, `n_steps: T` -> `num_envs_per_worker: E`,
  `rollout_fragment_length: T`, `train_batch_size: E * T` (`num_workers: 0`);
  `gae_lambda` -> `lambda`, `ent_coef` -> `entropy_coeff`, `max_grad_norm` -> `grad_clip`
  (A2C: see below); SB3's on-policy `MlpPolicy` -> `model: {fcnet_hiddens: [64, 64],
  fcnet_activation: tanh, vf_share_layers: false}`. SB3 initialises these nets orthogonally
  (gain sqrt(2), 0.01 for the action head, 1 for the value head), rlfleet as the reference
  (normc): no key translates it.
- PPO `batch_size: B`, `n_epochs: K` -> `sgd_minibatch_size: B`, `num_sgd_iter: K`;
  `vf_coef: c` -> `vf_loss_coeff: c`, `vf_clip_param: 1e10` (SB3 does not clip the value
  loss by default), `kl_coeff: 0`, SB3's Adam eps -> `optimizer: {eps: 1e-5}`.
  `learning_rate: lin_x` -> `lr_schedule: [[0, x], [n_timesteps, 0]]` (rlfleet reads it at
  the timestep of the last sync, one train batch behind SB3's progress). `clip_range: lin_c`
  -> `clip_param: c`, constant: rlfleet's PPO (as the reference's) has no clip schedule; with
  the learning rate decaying to 0 the late clip matters little (ppo-cartpole scores 500).
  SB3 normalises advantages per minibatch, rlfleet per train batch: the same when
  `batch_size = n_steps * n_envs` (ppo-cartpole).
- A2C: rlfleet's loss (the reference's) sums over the batch, SB3's averages, and rlfleet
  halves the squared value error: with `train_batch_size` N, `vf_coef: c` -> `vf_loss_coeff:
  2c`, `max_grad_norm: g` -> `grad_clip: g * N`, and SB3's optimizer, RMSprop(alpha 0.99,
  eps 1e-5), -> `opt_type: rmsprop, decay: 0.99, epsilon: 1e-5 * N` (RMSprop is invariant to
  the loss scale but for its epsilon): the same update as SB3's
  (tests/tuned_examples/test_zoo_classic.py). No advantage normalisation in either. With Adam (rlfleet's
  default, `optimizer: {eps: 1e-5 * N}`) a2c-cartpole scored 500.0, 415.2, 500.0.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# name -> (tuned example, the Zoo's published score)
CASES: Dict[str, tuple] = {
    "dqn-cartpole": ("tuned_examples/dqn/cartpole-dqn-zoo.yaml", 500.0),
    "sac-pendulum": ("benchmarks/zoo_cases/pendulum-sac-zoo.yaml", -157.0),
    "td3-pendulum": ("benchmarks/zoo_cases/pendulum-td3-zoo.yaml", -160.0),
    # -- classic control and Box2D --
    # LunarLander: issue 18's target 200 (the Zoo's benchmark.md, one run each on -v2: PPO
    # 242.1 +- 31.8, DQN 154.4 +- 79.2); pip install 'rlfleet[box2d]'.
    "ppo-lunarlander": ("benchmarks/zoo_cases/lunarlander-ppo-zoo.yaml", 200.0),
    "dqn-lunarlander": ("benchmarks/zoo_cases/lunarlander-dqn-zoo.yaml", 200.0),
    # The Zoo's DQN settings plus double Q, the dueling head, 3-step returns and a 100k buffer.
    "dqn-lunarlander-tuned": ("benchmarks/zoo_cases/lunarlander-dqn.yaml", 200.0),
    "a2c-cartpole": ("tuned_examples/a2c/cartpole-a2c-zoo.yaml", 500.0),
    "ppo-cartpole": ("tuned_examples/ppo/cartpole-ppo-zoo.yaml", 500.0),
    "td3-mountaincar": ("benchmarks/zoo_cases/mountaincar-td3-zoo.yaml", 90.0),
    # -- MinAtar and MuJoCo --
    # MinAtar: the MinAtar paper's DQN settings (no Zoo score: nan); runs: benchmarks/minatar_bench.py.
    "dqn-minatar-breakout": ("benchmarks/zoo_cases/minatar-breakout-dqn.yaml", float("nan")),
    "dqn-minatar-spaceinvaders": ("benchmarks/zoo_cases/minatar-space-invaders-dqn.yaml", float("nan")),
    "ppo-minatar-breakout": ("benchmarks/zoo_cases/minatar-breakout-ppo.yaml", float("nan")),
    "ppo-minatar-spaceinvaders": ("benchmarks/zoo_cases/minatar-space-invaders-ppo.yaml", float("nan")),
    # MuJoCo: the Zoo's scores after 1M steps on the -v3 envs; runs: benchmarks/mujoco_bench.py.
    "sac-halfcheetah": ("benchmarks/zoo_cases/halfcheetah-sac.yaml", 9535.5),
    "sac-hopper": ("benchmarks/zoo_cases/hopper-sac.yaml", 2325.5),
    "td3-halfcheetah": ("benchmarks/zoo_cases/halfcheetah-td3.yaml", 9655.7),
    "td3-hopper": ("benchmarks/zoo_cases/hopper-td3.yaml", 3606.4),
}
# A bare run: the cases with a Zoo budget (MinAtar and MuJoCo train for 1M-5M steps: their
# own scripts run them at a reduced budget).
DEFAULT_CASES = [name for name, (path, _) in CASES.items() if "minatar" not in path
                 and not os.path.basename(path).startswith(("halfcheetah", "hopper"))]


def load_case(name: str) -> dict:
    """`{run, env, stop, config}` of case `name` (the YAML's single experiment)."""
    import yaml

    path = os.path.join(ROOT, CASES[name][0])
    with open(path) as f:
        experiments = yaml.safe_load(f)
    (exp,) = experiments.values()
    return exp


def greedy_score(trainer, env_id: str, episodes: int, env_config: Optional[dict] = None) -> List[float]:
    """Returns of `episodes` episodes with `explore=False` on fresh envs seeded 10_000 + i.

    The env is built the way the trainer builds its own (`register_env` names, class paths,
    Gymnasium ids, `env_config`), so every case is scored on the env it trained on.
    """
    from rlfleet.env.env_context import EnvContext
    from rlfleet.env.registry import resolve_env

    _, creator = resolve_env(env_id)
    env = creator(EnvContext(env_config or {}))
    returns = []
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=10_000 + i)
            total, done = 0.0, False
            while not done:
                action = trainer.compute_single_action(obs, explore=False)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns


def run_case(name: str, seed: int, episodes: int = 10, timesteps: Optional[int] = None,
             overrides: Optional[dict] = None) -> dict:
    """Trains case `name` with `seed` for its budget (or `timesteps`) and scores it greedily.

    Returns:
        `{case, seed, score, steps, wall_s, returns}`.
    """
    from rlfleet.registry import get_trainer_class

    exp = load_case(name)
    budget = int(timesteps or exp["stop"]["timesteps_total"])
    config = dict(exp.get("config") or {}, seed=seed, log_sys_usage=False)
    config.update(overrides or {})
    logdir = tempfile.mkdtemp(prefix=f"zoo_{name}_{seed}_")
    trainer = get_trainer_class(exp["run"])(env=exp["env"], config=config, logdir=logdir)
    start = time.perf_counter()
    try:
        result = {"timesteps_total": 0}
        while result["timesteps_total"] < budget:
            result = trainer.train()
        wall = time.perf_counter() - start
        returns = greedy_score(trainer, exp["env"], episodes, config.get("env_config"))
    finally:
        trainer.stop()
    return {"case": name, "seed": seed, "score": statistics.mean(returns), "steps": result["timesteps_total"],
            "wall_s": wall, "returns": returns}


def run_cases(cases: List[str], seeds: List[int], episodes: int, timesteps: Optional[int] = None,
              overrides: Optional[dict] = None) -> List[dict]:
    """`run_case` for every case and seed, printing each run as it ends."""
    rows = []
    for name in cases:
        for seed in seeds:
            row = run_case(name, seed, episodes, timesteps, overrides=overrides)
            rows.append(row)
            print(f"{name} seed {seed}: {row['score']:.1f} after {row['steps']} env steps, {row['wall_s']:.0f} s "
                  f"(returns {[round(r, 1) for r in row['returns']]})", flush=True)
    return rows


def markdown_table(rows: List[dict], seeds: List[int]) -> str:
    """One line per case: the Zoo's score, the greedy score per seed, the median, steps and wall time."""
    head = ["case", "Zoo score"] + [f"seed {s}" for s in seeds] + ["median", "env steps", "wall s (per run)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in dict.fromkeys(r["case"] for r in rows):
        mine = {r["seed"]: r for r in rows if r["case"] == name}
        scores = [mine[s]["score"] for s in seeds if s in mine]
        walls = ", ".join(f"{mine[s]['wall_s']:.0f}" for s in seeds if s in mine)
        steps = max(r["steps"] for r in mine.values())
        cells = [name, f"{CASES[name][1]:g}"] + [f"{mine[s]['score']:.1f}" if s in mine else "-" for s in seeds]
        cells += [f"{statistics.median(scores):.1f}", str(steps), walls]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _json_dict(text: str) -> dict:
    """`--config`'s value: a JSON object of config keys."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({err}); e.g. '{{\"tau\": 0.01}}'") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} must be a JSON object of config keys, e.g. '{{\"tau\": 0.01}}'")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=None, help=f"among {sorted(CASES)} (default: {DEFAULT_CASES})")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=10, help="greedy evaluation episodes per run")
    parser.add_argument("--timesteps", type=int, default=None, help="override the Zoo budget (quick checks)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--config", default=None, type=_json_dict,
                        help="JSON dict merged over each case's config (e.g. to measure one difference)")
    parser.add_argument("--out", default=None, help="also write the Markdown table to this file")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, (path, score) in CASES.items():
            print(f"{name:14s} Zoo {score:7g}  {path}")
        return 0
    cases = args.cases or DEFAULT_CASES
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"--cases {unknown} unknown; choose among {sorted(CASES)}")
    import torch

    torch.set_num_threads(args.threads)
    rows = run_cases(cases, args.seeds, args.episodes, args.timesteps, args.config)
    table = markdown_table(rows, args.seeds)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
