"""`model.custom_model` in the algorithms that build their own networks (issue 26).

DQN and APEX build the user's model as the Q-network's base (it gives the features, the Q heads
go on top) and learn through it; SAC, CQL, DDPG, TD3 and APEX_DDPG refuse it by name instead of
ignoring it.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlfleet.algorithms.common.custom_models import CustomModelTrunk
from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.torch_model import TorchModel
from rlfleet.registry import get_trainer_class


class RecordingModel(TorchModel):
    """A custom model that counts its constructions and forward passes."""

    built = 0
    forward_calls = 0

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, width=8):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        RecordingModel.built += 1
        self.body = nn.Sequential(nn.Linear(int(np.prod(obs_space.shape)), width), nn.Tanh(),
                                  nn.Linear(width, num_outputs))

    def forward(self, input_dict, state, seq_lens):
        RecordingModel.forward_calls += 1
        return self.body(input_dict["obs"].float().reshape(input_dict["obs"].shape[0], -1)), state


ModelCatalog.register_custom_model("recording_q_model", RecordingModel)

DQN_SMALL = {"seed": 0, "min_iter_time_s": 0, "timesteps_per_iteration": 0, "learning_starts": 0,
             "rollout_fragment_length": 16, "train_batch_size": 16, "log_sys_usage": False,
             "model": {"custom_model": "recording_q_model", "custom_model_config": {"width": 6},
                       "fcnet_hiddens": [12]},
             "hiddens": [10]}


@pytest.mark.parametrize("algo", ["DQN", "SimpleQ"])
def test_dqn_builds_the_custom_model_as_its_base_and_learns_through_it(algo, tmp_path):
    RecordingModel.built = RecordingModel.forward_calls = 0
    config = dict(DQN_SMALL, **({"dueling": True} if algo == "DQN" else {}))
    trainer = get_trainer_class(algo)(env="CartPole-v1", logdir=str(tmp_path), config=config)
    try:
        policy = trainer.get_policy()
        q_net = policy.model.q_net
        assert isinstance(q_net.trunk, CustomModelTrunk)
        assert isinstance(q_net.trunk.net, RecordingModel)
        # The reference's width: the last of [256] + fcnet_hiddens when the heads have hiddens.
        assert q_net.trunk.out_size == 12 and q_net.trunk.net.num_outputs == 12
        assert RecordingModel.built == 1  # the constructor ran (the target net is a copy of it)
        assert isinstance(policy.model.target_q_net.trunk.net, RecordingModel)
        before = {k: v.copy() for k, v in policy.get_weights().items() if "q_trunk" in k or "trunk.net" in k}
        assert before, "the custom model's weights are part of the policy's weights"
        result = trainer.train()
        assert result["timesteps_total"] >= 16
        assert RecordingModel.forward_calls > 16  # acted and learned through it
        after = policy.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)
        # The NumPy fast path restates only the built-in MLP: a custom trunk learns in torch.
        from rlfleet.algorithms.dqn.numpy_learner import unsupported_reason

        assert "custom model" in unsupported_reason(policy)
    finally:
        trainer.stop()


def test_custom_trunk_without_q_hiddens_outputs_one_feature_per_action():
    import gymnasium as gym

    from rlfleet.algorithms.common.custom_models import custom_trunk_width

    assert custom_trunk_width({"fcnet_hiddens": [64, 32]}, [256], 2) == 32
    assert custom_trunk_width({"fcnet_hiddens": []}, [256], 2) == 256
    assert custom_trunk_width({"fcnet_hiddens": [64]}, [], 5) == 5
    trunk = CustomModelTrunk(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2),
                             {"custom_model": RecordingModel}, 4)
    assert trunk(torch.zeros(5, 3)).shape == (5, 4)


def test_apex_builds_the_custom_model(tmp_path):
    RecordingModel.built = 0
    config = dict(DQN_SMALL, num_workers=0, timesteps_per_iteration=32, learning_starts=32, buffer_size=1000,
                  target_network_update_freq=100)
    trainer = get_trainer_class("APEX")(env="CartPole-v1", logdir=str(tmp_path), config=config)
    try:
        assert isinstance(trainer.get_policy().model.q_net.trunk.net, RecordingModel)
        assert trainer.train()["timesteps_total"] >= 32
    finally:
        trainer.stop()


@pytest.mark.parametrize("algo,env,names", [
    ("SAC", "Pendulum-v1", "SAC and CQL"),
    ("DDPG", "Pendulum-v1", "DDPG, TD3 and APEX_DDPG"),
    ("TD3", "Pendulum-v1", "DDPG, TD3 and APEX_DDPG"),
])
def test_algorithms_with_their_own_networks_refuse_a_custom_model(algo, env, names, tmp_path):
    RecordingModel.built = 0
    with pytest.raises(ValueError, match=rf"model.custom_model='recording_q_model' is not supported by {names}"):
        get_trainer_class(algo)(env=env, logdir=str(tmp_path),
                                config={"model": {"custom_model": "recording_q_model"}})
    assert RecordingModel.built == 0


def test_cql_refuses_a_custom_model():
    import gymnasium as gym

    from rlfleet.algorithms.cql.cql_policy import CQLTorchPolicy
    from rlfleet.algorithms.cql.cql import DEFAULT_CONFIG
    from rlfleet.config import merge_configs

    config = merge_configs(DEFAULT_CONFIG, {"model": {"custom_model": "recording_q_model"}})
    with pytest.raises(ValueError, match="model.custom_model='recording_q_model' is not supported by SAC and CQL"):
        CQLTorchPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (1,)), config)
