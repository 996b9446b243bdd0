"""rlfleet against other RL libraries on the same machine: wall time from process start to a
return threshold, the same hyperparameters on every side.

Side by side (PPO CartPole-v1 to a mean return of 450 over the last 100 episodes), each peer
in its own venv, none a dependency of rlfleet:

    python benchmarks/peers.py --setup                 # venvs under ~/.cache/rlfleet-peers
    python benchmarks/peers.py --peers cleanrl sb3 rllib pufferlib tianshou torchrl sample_factory \
        --setting 8env batched --seeds 0 1 2

`--setting 8env` trains tuned_examples/ppo/cartpole-ppo.yaml (8 envs stepped one by one),
`batched` cartpole-ppo-vector.yaml (64 envs, Gymnasium's batched CartPole); `hyperparameters()`
translates the file key by key for the scripts in benchmarks/peers/ (one per library, each on
the library's public API and on its own batched path where it has one; see each docstring).
Per seed, one rlfleet run and one run of each peer, each a fresh process (imports count),
rlfleet first on even seeds and last on odd ones; prints each run, then per setting a table of
medians (min-max) and each peer's median wall over rlfleet's.

Against Stable-Baselines3 in this venv (`pip install 'rlfleet[bench]'`), more algorithms:

    python benchmarks/peers.py                         # both cases, seeds 0 1 2
    python benchmarks/peers.py --cases ppo-cartpole --seeds 0 1 2 3 4

Cases (the RL Baselines3 Zoo's hyperparams/ppo.yml and sac.yml, SB3's defaults elsewhere):
- `ppo-cartpole`: PPO on CartPole-v1 until the mean return of the last 100 episodes reaches
  450 (checked after each rollout of 8 envs x 32 steps; cap 200k steps). Zoo: n_envs 8,
  n_steps 32, batch_size 256, n_epochs 20, gae_lambda 0.8, gamma 0.98, learning_rate
  lin_1e-3, clip_range lin_0.2, ent_coef 0; SB3 defaults: vf_coef 0.5, max_grad_norm 0.5,
  Adam eps 1e-5, separate [64, 64] tanh actor and critic. rlfleet cannot anneal the clip
  range: it keeps 0.2.
- `sac-pendulum`: SAC on Pendulum-v1 until the mean return of the last 5 episodes reaches
  -250 (cap 30k steps). Zoo: learning_rate 1e-3; SB3 defaults: [256, 256] ReLU nets, batch
  256, tau 0.005, gamma 0.99, learning_starts 100, one update per env step, entropy
  coefficient tuned from 1.0 towards -|A|.
- `td3-pendulum`: TD3 on Pendulum-v1 until the mean return of the last 5 episodes reaches
  -250 (cap 20k steps, the Zoo's budget). Zoo (hyperparams/td3.yml): gamma 0.98, buffer
  200k, learning_starts 10000, Gaussian action noise 0.1, learning_rate 1e-3, net [400, 300];
  SB3 defaults: batch 256, tau 0.005, policy_delay 2, target noise 0.2 clipped at 0.5, one
  update per env step after the random start.
- `dqn-cartpole`: DQN on CartPole-v1 until the mean return of the last 20 episodes reaches
  195 (cap 50k steps, the Zoo's budget; with exploration on, neither library's training mean
  reached 450 within it on seed 0). Zoo (hyperparams/dqn.yml): learning_rate 2.3e-3,
  batch 64, buffer 100k, learning_starts 1000, gamma 0.99, target_update_interval 10,
  train_freq 256, gradient_steps 128, exploration_fraction 0.16, exploration_final_eps 0.04,
  net [256, 256]; SB3 defaults: plain DQN (no double Q, dueling, n-step or prioritised
  replay), Huber loss, max_grad_norm 10. rlfleet does 128 updates of 64 rows after every 256
  env steps (`training_intensity` 32) and copies the target when 10 env steps have passed
  since the last copy, checked after each update: once per round of 128 updates, after its
  first (SB3 copies it during collection, before the round).

Each run is a fresh Python process (imports, env and network set-up count: the wall is the
child's whole lifetime, measured by this parent); the two libraries alternate, the order
flipping from seed to seed. Both use one thread (`--threads 1`, the default) or each its own
default (`--threads default`: SB3's torch on every core, rlfleet's learner rule). Prints each run, then per case the
medians, the spread and the ratio rlfleet / SB3 (lower is better) of the medians.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

PPO_STEPS, SAC_STEPS, TD3_STEPS, DQN_STEPS = 200_000, 30_000, 20_000, 50_000

RLFLEET_PPO = {
    "seed": 0, "num_workers": 0, "num_envs_per_worker": 8, "rollout_fragment_length": 32, "train_batch_size": 256,
    "sgd_minibatch_size": 256, "num_sgd_iter": 20, "lambda": 0.8, "gamma": 0.98, "entropy_coeff": 0.0,
    "lr": 1e-3, "lr_schedule": [[0, 1e-3], [100_000, 0.0]], "clip_param": 0.2, "vf_loss_coeff": 0.5,
    "grad_clip": 0.5, "kl_coeff": 0.0, "vf_clip_param": 1e9, "optimizer": {"eps": 1e-5},
    "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False},
    "metrics_smoothing_episodes": 100,
}
RLFLEET_SAC = {
    "seed": 0, "gamma": 0.99, "tau": 0.005, "buffer_size": 1_000_000, "learning_starts": 100,
    "train_batch_size": 256, "rollout_fragment_length": 1, "target_network_update_freq": 0,
    "initial_alpha": 1.0, "target_entropy": "auto",
    "Q_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    "policy_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    "optimization": {"actor_learning_rate": 1e-3, "critic_learning_rate": 1e-3, "entropy_learning_rate": 1e-3},
    # Check the threshold after every episode (200 steps); the mean is over the last 5.
    "timesteps_per_iteration": 200, "min_iter_time_s": 0, "metrics_smoothing_episodes": 5,
}
RLFLEET_TD3 = {
    "seed": 0, "gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000,
    "exploration_config": {"type": "GaussianNoise", "random_timesteps": 10_000, "stddev": 0.1,
                           "initial_scale": 1.0, "final_scale": 1.0},
    "actor_lr": 1e-3, "critic_lr": 1e-3, "actor_hiddens": [400, 300], "critic_hiddens": [400, 300],
    "train_batch_size": 256, "tau": 0.005, "policy_delay": 2, "smooth_target_policy": True, "target_noise": 0.2,
    "target_noise_clip": 0.5, "l2_reg": 0.0, "rollout_fragment_length": 1, "target_network_update_freq": 0,
    "timesteps_per_iteration": 200, "min_iter_time_s": 0, "metrics_smoothing_episodes": 5,
}
RLFLEET_DQN = {
    "seed": 0, "lr": 2.3e-3, "train_batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000, "gamma": 0.99,
    "rollout_fragment_length": 256, "training_intensity": 32, "target_network_update_freq": 10,
    "exploration_config": {"initial_epsilon": 1.0, "final_epsilon": 0.04, "epsilon_timesteps": 8000},
    "model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}, "hiddens": [], "dueling": False,
    "double_q": False, "n_step": 1, "prioritized_replay": False, "grad_clip": 10,
    "timesteps_per_iteration": 256, "min_iter_time_s": 0, "metrics_smoothing_episodes": 20,
}
# Per case: the rlfleet trainer (module, class), env, config, return threshold, step cap.
CASES = {
    "ppo-cartpole": (("rlfleet.algorithms.ppo", "PPOTrainer"), "CartPole-v1", RLFLEET_PPO, 450.0, PPO_STEPS),
    "sac-pendulum": (("rlfleet.algorithms.sac", "SACTrainer"), "Pendulum-v1", RLFLEET_SAC, -250.0, SAC_STEPS),
    "td3-pendulum": (("rlfleet.algorithms.td3", "TD3Trainer"), "Pendulum-v1", RLFLEET_TD3, -250.0, TD3_STEPS),
    "dqn-cartpole": (("rlfleet.algorithms.dqn", "DQNTrainer"), "CartPole-v1", RLFLEET_DQN, 195.0, DQN_STEPS),
}


# --- children: one run each, printing "RESULT {...}" ------------------------------------------
def _pin_torch_threads() -> None:
    """One torch thread, unless `--threads default` left each library its own default."""
    if os.environ.get("PEERS_THREADS", "1") == "1":
        import torch

        torch.set_num_threads(1)


def run_rlfleet(case: str, seed: int) -> Dict[str, Any]:
    import importlib

    _pin_torch_threads()
    (module, name), env, config, threshold, cap = CASES[case]
    cls = getattr(importlib.import_module(module), name)
    config = dict(config, seed=seed)
    trainer = cls(env=env, config=config, logger_creator=_no_logger)
    try:
        while True:
            result = trainer.train()
            reward, steps = result["episode_reward_mean"], result["timesteps_total"]
            # The mean needs a full window, as SB3's buffer of the last episodes.
            full = len(result["hist_stats"]["episode_reward"]) >= config["metrics_smoothing_episodes"]
            if (full and reward >= threshold) or steps >= cap:
                return {"steps": int(steps), "reward": float(reward), "solved": bool(full and reward >= threshold)}
    finally:
        trainer.stop()


class _NoLogger:
    def on_result(self, result: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _no_logger(config: Any) -> _NoLogger:
    return _NoLogger()


def run_sb3(case: str, seed: int) -> Dict[str, Any]:
    import numpy as np
    from stable_baselines3 import DQN, PPO, SAC, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise

    _pin_torch_threads()
    _, _, config, threshold, cap = CASES[case]
    window = config["metrics_smoothing_episodes"] if case != "ppo-cartpole" else 100
    out: Dict[str, Any] = {}

    class Stop(BaseCallback):
        def _check(self) -> bool:
            buf = [ep["r"] for ep in self.model.ep_info_buffer][-window:]
            if len(buf) >= window and float(np.mean(buf)) >= threshold:
                out.update(steps=int(self.num_timesteps), reward=float(np.mean(buf)), solved=True)
                return False
            return True

        def _on_step(self) -> bool:
            # PPO: at each rollout's end (8 envs x 32 steps), as rlfleet checks after each
            # train(); the others: after each episode.
            if case == "ppo-cartpole":
                return self._check() if self.n_calls % 32 == 0 else True
            if any("episode" in info for info in self.locals.get("infos", [])):
                return self._check()
            return True

    if case == "ppo-cartpole":
        env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
        lin = lambda start: (lambda progress: progress * start)  # noqa: E731 (the Zoo's lin_)
        model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                    ent_coef=0.0, learning_rate=lin(1e-3), clip_range=lin(0.2), seed=seed, device="cpu", verbose=0)
    elif case == "sac-pendulum":
        model = SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, seed=seed, device="cpu", verbose=0)
    elif case == "td3-pendulum":
        noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
        model = TD3("MlpPolicy", "Pendulum-v1", gamma=0.98, buffer_size=200_000, learning_starts=10_000,
                    action_noise=noise, learning_rate=1e-3, policy_kwargs={"net_arch": [400, 300]}, seed=seed,
                    device="cpu", verbose=0)
    else:
        model = DQN("MlpPolicy", "CartPole-v1", learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                    learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
                    exploration_fraction=0.16, exploration_final_eps=0.04, policy_kwargs={"net_arch": [256, 256]},
                    seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=cap, callback=Stop())
    if not out:
        buf = [ep["r"] for ep in model.ep_info_buffer][-window:]
        out = {"steps": int(model.num_timesteps), "reward": float(np.mean(buf)) if buf else float("nan"),
               "solved": False}
    return out


# --- side by side: PPO CartPole to 450 against each peer, each in its own venv ----------------
PEER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")
CACHE = os.environ.get("RLFLEET_PEERS_CACHE", os.path.expanduser("~/.cache/rlfleet-peers"))
TORCH = "torch==2.13.0"  # first, exactly: a looser spec lets pip pull a CUDA build (GBs)
# Per peer: pip installs after torch, in order (each a list of arguments), and extra environment.
# Sample Factory 2.1.1 and PufferLib 3.0.0 pin numpy < 2 and gymnasium < 1.
PEERS: Dict[str, Dict[str, Any]] = {
    "cleanrl": {"pip": [["gymnasium>=1.0", "numpy"]]},
    "sb3": {"pip": [["stable-baselines3==2.9.2"]]},
    "rllib": {"pip": [["ray[rllib]"]]},
    "pufferlib": {
        "pip": [["numpy<2", "gymnasium<1", "setuptools", "wheel", "Cython", "pybind11"],
                ["--no-build-isolation", "--no-binary", "pufferlib", "pufferlib==3.0.0"]],
        # Without NO_OCEAN its sdist downloads raylib and box2d at build time (no network here);
        # with it, its setup.py still names `c_extension_paths`, set only when building the
        # Ocean C envs: `build_shim` defines it (empty) for the build. Its CUDA kernels are
        # skipped when nvcc is not on PATH (the CPU build of its advantage kernel remains).
        "env": {"NO_OCEAN": "1"}, "hide_nvcc": True, "build_shim": True,
    },
    "tianshou": {"pip": [["tianshou==2.0.1"]]},
    "torchrl": {"pip": [["torchrl==0.14.1", "gymnasium>=1.0"]]},
    "sample_factory": {"pip": [["numpy<2", "gymnasium<1"], ["sample-factory==2.1.1"]]},
}
ORDER = list(PEERS)


def peer_python(peer: str) -> str:
    return os.path.join(CACHE, peer, "bin", "python")


def _build_shim(peer: str) -> str:
    """A .pth file in the venv (its lines starting with `import` run at interpreter start, see
    https://docs.python.org/3/library/site.html) that defines `c_extension_paths` as an empty
    builtin while NO_OCEAN=1, for a --no-build-isolation build; removed after the install."""
    site = subprocess.run([peer_python(peer), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    path = os.path.join(site, "rlfleet_peers_build_shim.pth")
    with open(path, "w") as f:
        f.write('import builtins, os; os.environ.get("NO_OCEAN") == "1" and '
                'setattr(builtins, "c_extension_paths", [])\n')
    return path


def setup(peers: List[str]) -> None:
    """Create one venv per peer under CACHE, torch pinned first; report what failed and why."""
    failed: Dict[str, str] = {}
    for peer in peers:
        spec, venv = PEERS[peer], os.path.join(CACHE, peer)
        base = "python3.11" if shutil.which("python3.11") else sys.executable
        env = dict(os.environ, **spec.get("env", {}))
        if spec.get("hide_nvcc"):
            env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                          if not os.path.exists(os.path.join(p, "nvcc")))
            env.pop("CUDA_HOME", None)
        if not os.path.exists(peer_python(peer)):
            subprocess.run([base, "-m", "venv", venv], check=True)
        shim = _build_shim(peer) if spec.get("build_shim") else None
        steps = [[peer_python(peer), "-m", "pip", "install", "-q", TORCH]]
        steps += [[peer_python(peer), "-m", "pip", "install", "-q", *args] for args in spec["pip"]]
        for cmd in steps:
            print(f"[{peer}] {' '.join(cmd)}", flush=True)
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                failed[peer] = (proc.stderr or proc.stdout)[-2000:]
                print(f"[{peer}] FAILED:\n{failed[peer]}", flush=True)
                break
        else:
            print(f"[{peer}] ready: {venv}", flush=True)
        if shim:
            os.remove(shim)
    if failed:
        raise SystemExit(f"setup failed for: {', '.join(failed)}")


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Each setting's hyperparameters come from rlfleet's tuned example; every peer gets them translated.
SETTINGS = {"8env": "tuned_examples/ppo/cartpole-ppo.yaml", "batched": "tuned_examples/ppo/cartpole-ppo-vector.yaml"}


def hyperparameters(setting: str) -> Dict[str, Any]:
    """The tuned example's PPO settings (rlfleet's defaults where the file is silent), by meaning."""
    import yaml

    from rlfleet.algorithms.ppo import DEFAULT_CONFIG

    path = os.path.join(REPO, SETTINGS[setting])
    with open(path) as f:
        (spec,) = yaml.safe_load(f).values()
    cfg = dict(DEFAULT_CONFIG, **spec["config"])
    model = dict(DEFAULT_CONFIG["model"], **cfg.get("model", {}))
    # rlfleet gathers fragments until train_batch_size rows: per env, train_batch_size / envs steps.
    n, t = cfg["num_envs_per_worker"], cfg["train_batch_size"] // cfg["num_envs_per_worker"]
    if cfg["train_batch_size"] != n * t or cfg["lr_schedule"] or cfg["kl_coeff"] or cfg["vf_clip_param"] < 1000:
        raise SystemExit(f"{path}: the peers' scripts translate one rollout per update (train_batch_size a multiple of "
                         f"the envs), a constant lr, no KL term and no value clipping; this file asks for more")
    return {
        "tuned_example": path, "batched": cfg.get("gym_env_vectorize_mode") == "vector_entry_point",
        "num_envs": n, "n_steps": t, "minibatch": cfg["sgd_minibatch_size"], "epochs": cfg["num_sgd_iter"],
        "lr": cfg["lr"], "gamma": cfg["gamma"], "gae_lambda": cfg["lambda"], "clip": cfg["clip_param"],
        "vf_coef": cfg["vf_loss_coeff"], "ent_coef": cfg["entropy_coeff"], "max_grad_norm": cfg["grad_clip"],
        "adam_eps": cfg.get("optimizer", {}).get("eps", 1e-8), "norm_adv": True,  # rlfleet standardises advantages
        "hiddens": model["fcnet_hiddens"], "activation": model["fcnet_activation"],
        "shared": bool(model["vf_share_layers"]),
        "threshold": 450.0, "window": 100, "budget": spec["stop"]["timesteps_total"],
    }


def run_script(peer: str, hp: Dict[str, Any], seed: int, timeout: float) -> Dict[str, Any]:
    """One run of `peers/<peer>_ppo.py` in the peer's venv; the wall is the process's lifetime."""
    python = sys.executable if peer == "rlfleet" else peer_python(peer)
    if not os.path.exists(python):
        return {"error": f"no venv at {os.path.dirname(os.path.dirname(python))}: run --setup {peer}"}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               RLFLEET_RESULTS_DIR=tempfile.mkdtemp(prefix="rlfleet-peers-"))
    if peer == "rlfleet":
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "src"), env.get("PYTHONPATH", "")])
    else:
        env.pop("PYTHONPATH", None)
    cmd = [python, os.path.join(PEER_DIR, f"{peer}_ppo.py"), "--seed", str(seed), "--hparams", json.dumps(hp)]
    start = time.perf_counter()
    try:
        # In the run's own temporary folder: PufferLib links a `resources` folder into the working
        # directory at import, which must not land in the repository.
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=env["RLFLEET_RESULTS_DIR"],
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"}
    result = json.loads(lines[-1][len("RESULT "):])
    return dict(result, wall=wall, steps_per_s=result["steps"] / max(result["train_s"], 1e-9))


def _med(values: List[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "-"
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def side_by_side(peers: List[str], settings: List[str], seeds: List[int], timeout: float) -> None:
    """Per setting and seed, one rlfleet run and one run of each peer, rlfleet first on even seeds
    and last on odd ones; ratios are of medians over the same seeds, taken in the same stretch."""
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; one torch thread each",
          flush=True)
    for setting in settings:
        hp = hyperparameters(setting)
        runs: Dict[str, List[Dict[str, Any]]] = {p: [] for p in ["rlfleet", *peers]}
        for i, seed in enumerate(seeds):
            for who in (["rlfleet", *peers] if i % 2 == 0 else [*peers, "rlfleet"]):
                r = dict(run_script(who, hp, seed, timeout), load=os.getloadavg()[0])
                runs[who].append(r)
                if "error" in r:
                    print(f"{setting} {who:14s} seed {seed}: FAILED {r['error']}", flush=True)
                    continue
                print(f"{setting} {who:14s} seed {seed}: {r['wall']:6.1f} s wall, {r['steps']:6d} steps, "
                      f"{r['steps_per_s']:7.0f} steps/s, return {r['reward']:5.1f}"
                      f"{'' if r['solved'] else ' (NOT solved)'}, load {r['load']:.1f}", flush=True)
        print(f"\n{setting} ({SETTINGS[setting]}: {hp['num_envs']} envs{', batched' if hp['batched'] else ''}), "
              f"seeds {seeds}, load average now {os.getloadavg()[0]:.2f}")
        print("| library | wall to 450, s | env steps/s | steps to 450 (k) | solved | wall / rlfleet's |")
        print("| --- | --- | --- | --- | --- | --- |")
        mine = [r["wall"] for r in runs["rlfleet"] if r.get("solved")]
        for who in ["rlfleet", *peers]:
            ok = [r for r in runs[who] if "error" not in r]
            # Only runs that reached 450 have a time to 450; a run that gave up counts as not solved.
            solved = [r["wall"] for r in ok if r["solved"]]
            ratio = f"{statistics.median(solved) / statistics.median(mine):.1f}x" if solved and mine else "-"
            print(f"| {who} | {_med(solved)} | {_med([r['steps_per_s'] for r in ok], '{:.0f}')} "
                  f"| {_med([r['steps'] / 1e3 for r in ok if r['solved']], '{:.0f}')} "
                  f"| {sum(r['solved'] for r in ok)}/{len(runs[who])} | {ratio} |", flush=True)


# --- parent ----------------------------------------------------------------------------------
def _run_child(lib: str, case: str, seed: int, threads: str = "1") -> Dict[str, Any]:
    env = dict(os.environ, RLFLEET_RESULTS_DIR=tempfile.mkdtemp(prefix="rlfleet-peers-"), PEERS_THREADS=threads)
    if threads == "1":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", lib, case, str(seed)],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{lib} {case} seed {seed} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1][len("RESULT "):]), wall=wall, cpu=cpu)


def _spread(values: List[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["ppo-cartpole", "sac-pendulum"], choices=sorted(CASES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", choices=["1", "default"], default="1",
                        help="1: both libraries on one thread (OMP_NUM_THREADS=1, one torch thread); default: "
                             "each library's own default (SB3: torch on every core; rlfleet: its learner rule)")
    parser.add_argument("--child", nargs=3, metavar=("LIB", "CASE", "SEED"), help=argparse.SUPPRESS)
    parser.add_argument("--peers", nargs="+", choices=ORDER,
                        help="PPO CartPole to 450 side by side with these peers (each from its venv, see --setup)")
    parser.add_argument("--setting", nargs="+", choices=sorted(SETTINGS), default=["8env", "batched"],
                        help="with --peers: 8env (cartpole-ppo.yaml) and/or batched (cartpole-ppo-vector.yaml)")
    parser.add_argument("--timeout", type=float, default=900.0, help="with --peers: seconds before a run is cut")
    parser.add_argument("--setup", nargs="*", metavar="PEER", choices=ORDER,
                        help="create each peer's venv under $RLFLEET_PEERS_CACHE (default ~/.cache/rlfleet-peers)")
    args = parser.parse_args()
    if args.peers:
        side_by_side(args.peers, args.setting, args.seeds, args.timeout)
        return
    if args.setup is not None:
        setup(args.setup or ORDER)
        return
    if args.child:
        lib, case, seed = args.child
        result = (run_rlfleet if lib == "rlfleet" else run_sb3)(case, int(seed))
        print("RESULT " + json.dumps(result), flush=True)
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; threads: {args.threads}")
    for case in args.cases:
        walls: Dict[str, List[float]] = {"rlfleet": [], "sb3": []}
        cpus: Dict[str, List[float]] = {"rlfleet": [], "sb3": []}
        for i, seed in enumerate(args.seeds):
            for lib in (("rlfleet", "sb3") if i % 2 == 0 else ("sb3", "rlfleet")):
                r = _run_child(lib, case, seed, args.threads)
                walls[lib].append(r["wall"])
                cpus[lib].append(r["cpu"])
                print(f"{case:13s} {lib:8s} seed {seed}: {r['wall']:6.1f} s (CPU {r['cpu']:6.1f} s), {r['steps']:6d} "
                      f"steps, return "
                      f"{r['reward']:7.1f}{'' if r['solved'] else ' (NOT solved)'}", flush=True)
        ratio = statistics.median(walls["rlfleet"]) / statistics.median(walls["sb3"])
        print(f"{case}: rlfleet {_spread(walls['rlfleet'])}, SB3 {_spread(walls['sb3'])}; "
              f"ratio rlfleet / SB3 (medians) {ratio:.2f}; CPU time: rlfleet {_spread(cpus['rlfleet'])}, "
              f"SB3 {_spread(cpus['sb3'])}, ratio {statistics.median(cpus['rlfleet']) / statistics.median(cpus['sb3']):.2f}"
              f"; load average now {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
