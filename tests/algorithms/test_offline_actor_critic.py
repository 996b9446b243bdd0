"""What CRR and IQL share (algorithms/common/offline_actor_critic.py): safe checkpoints that
restore weights, targets, optimizers and the replay, the export of the acting network,
evaluation on a remote worker, one update per row read, and clear errors."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.offline.pendulum_dataset import write_mixed_pendulum_dataset
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.registry import get_trainer_class
from tests.helpers import optimizer_arrays

ALGOS = ["CRR", "IQL"]
TINY = {"actor_hiddens": [16], "critic_hiddens": [16], "learning_starts": 200, "timesteps_per_iteration": 200,
        "train_batch_size": 32, "input_evaluation": [], "log_sys_usage": False}


@pytest.fixture(scope="module")
def pendulum_data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("oac") / "pendulum")
    write_mixed_pendulum_dataset(path, episodes=4, expert_fraction=0.5, seed=5)
    return path


def _trainer(algo, env, logdir, **config):
    return get_trainer_class(algo)(env=env, logdir=str(logdir), config={**TINY, **config})


@pytest.mark.parametrize("algo", ALGOS)
def test_one_update_per_row_read_and_a_checkpoint_restores_the_learner(algo, pendulum_data, tmp_path):
    trainer = _trainer(algo, "Pendulum-v1", tmp_path / "a", input=pendulum_data, seed=0,
                       store_buffer_in_checkpoints=True)
    try:
        for _ in range(2):
            result = trainer.train()
        policy = trainer.get_policy()
        # 2 iterations read 400 rows (two 200-row lines); from learning_starts (200 rows) on, every
        # row read pays one update.
        assert result["timesteps_total"] == 400 and policy.num_grad_updates == 400
        assert set(policy.optimizers) == ({"critic", "actor", "value"} if algo == "IQL" else {"critic", "actor"})
        weights = trainer.get_weights()[DEFAULT_POLICY_ID]
        assert any(k.startswith("target_q_net.") for k in weights) and not any("log_alpha" in k for k in weights)
        optim = optimizer_arrays(policy)
        path = trainer.save()
    finally:
        trainer.stop()
    restored = get_trainer_class(algo).from_checkpoint(path, logdir=str(tmp_path / "b"))
    try:
        assert restored.iteration == 2
        for name, value in restored.get_weights()[DEFAULT_POLICY_ID].items():
            np.testing.assert_array_equal(value, weights[name], err_msg=name)
        restored_optim = optimizer_arrays(restored.get_policy())
        assert restored_optim.keys() == optim.keys()
        for k in optim:
            np.testing.assert_array_equal(restored_optim[k], optim[k], err_msg=k)
        assert len(restored.local_replay_buffer) == 400
        restored.train()
        assert restored.get_policy().num_grad_updates == 600
    finally:
        restored.stop()


@pytest.mark.parametrize("algo,env", [("CRR", "Pendulum-v1"), ("IQL", "Pendulum-v1"), ("CRR", "CartPole-v1")])
def test_the_export_acts_as_the_greedy_policy(algo, env, tmp_path):
    trainer = _trainer(algo, env, tmp_path / "run", input="sampler", seed=1)
    try:
        trainer.train()
        path = trainer.export_policy_model(str(tmp_path / "export"))
        meta = json.loads((tmp_path / "export" / "model.json").read_text())
        assert meta["outputs"][0] == "actions"
        exported = torch.jit.load(path)
        sampler_env = gym.make(env)
        obs = np.stack([sampler_env.observation_space.sample() for _ in range(32)]).astype(np.float32)
        with torch.no_grad():
            actions = exported(torch.as_tensor(obs))[0].numpy()
        want = np.stack([trainer.compute_single_action(o, explore=False) for o in obs])
        np.testing.assert_allclose(actions.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    finally:
        trainer.stop()


@pytest.mark.slow
def test_evaluation_runs_on_a_remote_worker(pendulum_data, tmp_path, ray_session):
    trainer = _trainer("IQL", "Pendulum-v1", tmp_path, input=pendulum_data, seed=0, evaluation_interval=1,
                       evaluation_num_workers=1, evaluation_num_episodes=2)
    try:
        result = trainer.train()
        evaluation = result["evaluation"]
        assert evaluation["episodes_this_iter"] >= 2 and np.isfinite(evaluation["episode_reward_mean"])
        assert len(trainer.evaluation_workers.remote_workers()) == 1
    finally:
        trainer.stop()


@pytest.mark.parametrize("algo", ALGOS)
def test_clear_errors(algo, tmp_path):
    from tests.algorithm_cases import ActionSpaceEnv, ACTION_SPACES

    cls = get_trainer_class(algo)
    with pytest.raises(ValueError, match=f"{algo} supports Box and Discrete action spaces only"):
        cls(env=ActionSpaceEnv, logdir=str(tmp_path), config={
            **TINY, "input": "sampler", "env_config": {"action_space": ACTION_SPACES["MultiDiscrete"]}})
    with pytest.raises(ValueError, match="unbounded"):
        cls(env=ActionSpaceEnv, logdir=str(tmp_path), config={
            **TINY, "input": "sampler", "env_config": {"action_space": gym.spaces.Box(-np.inf, np.inf, (2,))}})
    with pytest.raises(ValueError, match=f"not supported by {algo}"):
        cls(env="Pendulum-v1", logdir=str(tmp_path), config={**TINY, "model": {"custom_model": "x"}})
    bad = {"CRR": ("weight_type", "binary"), "IQL": ("expectile", 1.0)}[algo]
    with pytest.raises(ValueError, match=bad[0]):
        cls(env="Pendulum-v1", logdir=str(tmp_path), config={**TINY, bad[0]: bad[1]})
