"""MinAtar and MuJoCo (issue 18): the envs resolve from their plain Gymnasium ids, MinAtar's
boolean 10x10xC grids reach the MinAtar paper's conv net as 0/1 floats (no pixel scaling), and
every MinAtar / MuJoCo case (benchmarks/zoo_cases/) builds and trains one short iteration (120-200 env
steps) on its real env.

Skipped where `minatar` / `mujoco` are not installed. Learning at a reduced budget is
measured by benchmarks/minatar_bench.py and benchmarks/mujoco_bench.py, not here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.config import MODEL_DEFAULTS
from rlfleet.env.env_context import EnvContext
from rlfleet.env.registry import resolve_env
from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.preprocessors import get_preprocessor
from rlfleet.models.visionnet import VisionNetwork
from rlfleet.registry import get_trainer_class
from tests.helpers import REPO_ROOT, load_tuned_example

# Too long to learn in CI, so they live with the other long cases in benchmarks/zoo_cases/.
ZOO_CASES = REPO_ROOT / "benchmarks" / "zoo_cases"
MINATAR_EXAMPLES = ["minatar-breakout-dqn.yaml", "minatar-space-invaders-dqn.yaml",
                    "minatar-breakout-ppo.yaml", "minatar-space-invaders-ppo.yaml"]
MUJOCO_EXAMPLES = ["halfcheetah-sac.yaml", "hopper-sac.yaml", "halfcheetah-td3.yaml", "hopper-td3.yaml"]

# One short iteration: 120-200 env steps, learning from the 100th (~20 off-policy updates).
_SHORT = {
    "PPO": {"num_envs_per_worker": 2, "rollout_fragment_length": 100, "train_batch_size": 200,
            "sgd_minibatch_size": 100, "num_sgd_iter": 1},
    "DQN": {"learning_starts": 100, "buffer_size": 1000, "timesteps_per_iteration": 120},
    "SAC": {"learning_starts": 100, "buffer_size": 1000, "timesteps_per_iteration": 120,
            "exploration_config": {"type": "StochasticSampling", "random_timesteps": 100}},
    "TD3": {"learning_starts": 100, "buffer_size": 1000, "timesteps_per_iteration": 120},
}


def _minatar():
    pytest.importorskip("minatar", reason="MinAtar is not installed (pip install minatar)")


def _mujoco(monkeypatch, tmp_path):
    pytest.importorskip("mujoco", reason="MuJoCo is not installed (pip install mujoco)")
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warnings to ./MUJOCO_LOG.TXT


@pytest.mark.parametrize("env_id, channels, actions", [("MinAtar/Breakout-v1", 4, 3),
                                                       ("MinAtar/SpaceInvaders-v1", 6, 4)])
def test_minatar_ids_resolve_and_the_paper_network_sees_01_floats(env_id, channels, actions):
    _minatar()
    _, creator = resolve_env(env_id)  # `import minatar` alone registers nothing
    env = creator(EnvContext({}))
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.shape == (10, 10, channels) and env.observation_space.dtype == np.bool_
        assert env.action_space.n == actions and obs.dtype == np.bool_ and obs.any()
        prep = get_preprocessor(env.observation_space)
        assert prep.observation_space.dtype == np.float32 and prep.shape == (10, 10, channels)
        model_config = {**MODEL_DEFAULTS, **load_tuned_example(ZOO_CASES / "minatar-breakout-ppo.yaml").config["model"]}
        model = ModelCatalog.get_model(prep.observation_space, env.action_space, actions, model_config)
        assert isinstance(model, VisionNetwork) and model.pixels is None  # 0/1 stays 0/1
        # The paper's network: 16 3x3 filters, stride 1, valid padding -> 8x8x16, then 128 units.
        (conv,) = [m for m in model.convs if isinstance(m, torch.nn.Conv2d)]
        assert conv.in_channels == channels and conv.out_channels == 16 and conv.kernel_size == (3, 3)
        assert model.post[0].in_features == 8 * 8 * 16 and model.post[0].out_features == 128
        batch = torch.as_tensor(prep.transform_batch([obs, obs]))
        assert batch.dtype == torch.float32 and set(batch.unique().tolist()) == {0.0, 1.0}
        out, _ = model({"obs": batch}, [], None)
        assert out.shape == (2, actions)
        assert torch.equal(model._images, torch.as_tensor(obs, dtype=torch.float32).permute(2, 0, 1).expand(2, -1, -1, -1))
    finally:
        env.close()


def test_a_process_that_never_imported_minatar_builds_its_envs(monkeypatch):
    # A remote worker unpickles the creator and calls it without resolving the id first.
    _minatar()
    import gymnasium as gym

    from rlfleet.env.registry import _GymCreator

    resolve_env("MinAtar/Breakout-v1")
    for env_id in [k for k in gym.registry if k.startswith("MinAtar/")]:
        monkeypatch.delitem(gym.registry, env_id)
    env = _GymCreator("MinAtar/SpaceInvaders-v1")(EnvContext({}))
    try:
        assert env.observation_space.shape == (10, 10, 6)
    finally:
        env.close()


def _train_one_short_iteration(relpath: str, tmp_path) -> None:
    example = load_tuned_example(ZOO_CASES / relpath)
    config = dict(example.config, **_SHORT[example.run], log_sys_usage=False)
    trainer = get_trainer_class(example.run)(env=example.env, config=config, logdir=str(tmp_path / "logs"))
    try:
        result = trainer.train()
        assert 120 <= result["timesteps_total"] <= 200, result["timesteps_total"]
        assert trainer.counters["num_env_steps_trained"] > 0
        env = resolve_env(example.env)[1](EnvContext({}))
        obs, _ = env.reset(seed=0)
        env.close()
        action = trainer.compute_single_action(obs, explore=False)
        assert env.action_space.contains(np.asarray(action, dtype=env.action_space.dtype)), action
    finally:
        trainer.stop()


@pytest.mark.parametrize("relpath", MINATAR_EXAMPLES)
def test_minatar_tuned_example_trains_one_short_iteration(relpath, tmp_path):
    _minatar()
    _train_one_short_iteration(relpath, tmp_path)


@pytest.mark.parametrize("relpath", MUJOCO_EXAMPLES)
def test_mujoco_tuned_example_trains_one_short_iteration(relpath, tmp_path, monkeypatch):
    _mujoco(monkeypatch, tmp_path)
    _train_one_short_iteration(relpath, tmp_path)
