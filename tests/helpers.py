"""Helpers shared by several test files: the tuned examples, and training to a target.

Learning tests read their hyperparameters from `tuned_examples/` through these helpers, so a
tuned example and the test that guards it cannot drift apart (STYLE.md: no inline copies).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Tuple

import numpy as np

# The repository root: test modules sit in sub-folders of tests/, so they take paths from here
# instead of counting `Path(__file__).parents` themselves.
REPO_ROOT = Path(__file__).resolve().parents[1]
TUNED_EXAMPLES_DIR = REPO_ROOT / "tuned_examples"


@dataclass(frozen=True)
class TunedExample:
    """One experiment of a tuned-example YAML file, read as `rlfleet train -f FILE` reads it.

    Attributes:
        relpath: the file, relative to `tuned_examples/` (e.g. "ppo/cartpole-ppo.yaml").
        name: the experiment's name in the file.
        run: the algorithm name (e.g. "PPO").
        env: the env spec (a Gymnasium id, a registered name or a "pkg.mod:Class" path).
        stop: the stop criteria (e.g. {"episode_reward_mean": 450, "timesteps_total": 200000}).
        config: the trainer config, with `env` set as the CLI sets it. A test that runs the
            example on another env passes `env=` to the trainer, which wins over it.
    """

    relpath: str
    name: str
    run: str
    env: Any
    stop: Dict[str, float]
    config: Dict[str, Any]

    @property
    def test_id(self) -> str:
        """The file, plus the experiment's name where it differs from the file's stem."""
        same = self.name == Path(self.relpath).stem
        return self.relpath if same else f"{self.relpath}:{self.name}"


def tuned_example_files() -> List[Path]:
    """Every tuned-example YAML file, sorted (a new file is picked up without a test edit).
    The reference's own settings in `reference_1x/` are no seeded regressions of ours (no seed,
    other stop keys): tests/tuned_examples/test_reference_1x.py and benchmarks/reference_1x.py run those."""
    return sorted(p for p in TUNED_EXAMPLES_DIR.rglob("*.yaml") if "reference_1x" not in p.parts)


def load_tuned_examples(path: Path | str) -> List[TunedExample]:
    """The experiments of one tuned-example file, parsed by the CLI's own loader.

    Args:
        path: the YAML file, absolute or relative to `tuned_examples/`.

    Returns:
        One TunedExample per experiment, in file order.
    """
    from rlfleet import cli  # lazily: importing this module stays cheap

    path = Path(path)
    if not path.is_absolute():
        path = TUNED_EXAMPLES_DIR / path
    args = cli.build_parser().parse_args(["train", "-f", str(path)])
    # Long cases kept in benchmarks/zoo_cases/ are named from the repository's root.
    base = TUNED_EXAMPLES_DIR if path.is_relative_to(TUNED_EXAMPLES_DIR) else TUNED_EXAMPLES_DIR.parent
    relpath = path.relative_to(base).as_posix()
    return [TunedExample(relpath=relpath, name=exp.name, run=exp.run, env=exp.env, stop=dict(exp.stop),
                         config=exp.config)
            for exp in cli.load_experiments(args)]


def load_tuned_example(relpath: str) -> TunedExample:
    """The one experiment of a tuned-example file (for tests that vary a single example)."""
    (example,) = load_tuned_examples(relpath)
    return example


def all_tuned_examples() -> List[TunedExample]:
    """Every experiment of every tuned-example file."""
    return [example for path in tuned_example_files() for example in load_tuned_examples(path)]


def mean_episode_reward(result: Mapping[str, Any]) -> float:
    return result["episode_reward_mean"]


def train_until(trainer: Any, *, reward: float, max_timesteps: int,
                score: Callable[[Mapping[str, Any]], float] = mean_episode_reward,
                ) -> Tuple[Mapping[str, Any], List[Tuple[int, float]]]:
    """Calls `trainer.train()` until `score(result) >= reward` or `max_timesteps` env steps.

    The caller stops the trainer (so it can still inspect it afterwards).

    Args:
        trainer: a built trainer.
        reward: the score that ends training.
        max_timesteps: the env-step budget (`timesteps_total`) that ends training regardless.
        score: what is compared with `reward`; default the mean episode return. Multi-agent
            tests pass e.g. `lambda r: min(r["policy_reward_mean"].values())`.

    Returns:
        The last result, and the history `[(timesteps_total, score), ...]` of every iteration
        (for failure messages).
    """
    history: List[Tuple[int, float]] = []
    while True:
        result = trainer.train()
        history.append((result["timesteps_total"], score(result)))
        if score(result) >= reward or result["timesteps_total"] >= max_timesteps:
            return result, history


def optimizer_arrays(policy: Any) -> Dict[str, np.ndarray]:
    """Every optimizer's state of `policy` as `{"<optimizer>/<param index>/<entry>": array}`."""
    return {f"{name}/{i}/{k}": np.asarray(v)
            for name, opt in policy.get_state()["optimizers"].items()
            for i, s in opt["state"].items() for k, v in s.items()}


def assert_same_learner_state(a: Any, b: Any, stats_a: Mapping[str, float], stats_b: Mapping[str, float], *,
                              weight_tol: Tuple[float, float], moment_rtol: float, stats_rel: float) -> None:
    """Two policies trained alike hold the same weights (rtol, atol) and optimizer states,
    and reported the same learner stats."""
    import pytest

    wa, wb = a.get_weights(), b.get_weights()
    for k in wb:
        np.testing.assert_allclose(wa[k], wb[k], rtol=weight_tol[0], atol=weight_tol[1], err_msg=k)
    oa, ob = optimizer_arrays(a), optimizer_arrays(b)
    assert oa.keys() == ob.keys()
    for k in ob:
        np.testing.assert_allclose(oa[k], ob[k], rtol=moment_rtol, atol=1e-7, err_msg=k)
    assert stats_a.keys() == stats_b.keys()
    for k in stats_b:
        assert stats_a[k] == pytest.approx(stats_b[k], rel=stats_rel, abs=stats_rel / 10), k


def needs_mujoco(env_id: str) -> None:
    """Skips the calling test for a Gymnasium MuJoCo env (Hopper-v5, ...) when MuJoCo is not installed."""
    import gymnasium as gym
    import pytest

    if "mujoco" in str(gym.spec(env_id).entry_point):
        pytest.importorskip("mujoco", reason="MuJoCo is not installed (pip install mujoco)")


def kill_remote_worker(ray: Any, handle: Any, timeout_s: float = 30.0) -> None:
    """`ray.kill(handle)`, then waits until the actor is gone: the kill is asynchronous, and a
    health probe sent right after it could still reach the live worker."""
    import time

    ray.kill(handle)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(handle.apply.remote(lambda worker: None), timeout=timeout_s)
        except ray.exceptions.RayError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the killed actor {handle} still answered after {timeout_s} s")


def kill_process(pid: int, timeout_s: float = 30.0) -> None:
    """SIGKILLs the process `pid` and returns once it is gone (the kill lands asynchronously)."""
    import signal
    import time

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process {pid} still ran {timeout_s} s after SIGKILL")


def two_worker_ppo(logdir: str, **config: Any) -> Any:
    """A small PPO trainer on CartPole with two Ray workers (100-step iterations); `config`
    adds keys, e.g. `recreate_failed_workers=True`."""
    from rlfleet.algorithms.ppo import PPOTrainer

    return PPOTrainer(env="CartPole-v1", logdir=logdir, config={
        "num_workers": 2, "num_cpus_per_worker": 0.25, "rollout_fragment_length": 25, "train_batch_size": 100,
        "sgd_minibatch_size": 50, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "seed": 3, **config})


def read_tb_scalars(folder: str) -> Dict[str, List[Tuple[int, float]]]:
    """{tag: [(step, value)]} from every event file in `folder`, parsed with tensorboardX's
    own protobuf messages and the TFRecord framing (length, crc, data, crc)."""
    import glob
    import struct

    from tensorboardX.proto import event_pb2

    scalars = {}
    for path in glob.glob(os.path.join(folder, "events.out.tfevents.*")):
        data = open(path, "rb").read()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def assert_export_acts_as_trainer(trainer: Any, folder: Path, obs_dim: int) -> None:
    """Trains one iteration, exports the policy (TorchScript) into `folder` and checks that it
    gives the trainer's greedy actions on 5 random observations in [-1, 1]^obs_dim."""
    import json

    import torch

    trainer.train()
    path = trainer.export_policy_model(str(folder))
    meta = json.loads((Path(folder) / "model.json").read_text())
    obs = np.random.default_rng(0).uniform(-1, 1, (5, obs_dim)).astype(np.float32)
    with torch.no_grad():
        exported = torch.jit.load(path)(torch.from_numpy(obs))[0].numpy()
    want = np.stack([trainer.compute_single_action(o, explore=False) for o in obs])
    assert meta["outputs"][0] == "actions"
    np.testing.assert_allclose(exported, want, rtol=1e-5, atol=1e-6)
