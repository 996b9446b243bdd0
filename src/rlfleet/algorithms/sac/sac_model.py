"""SAC's networks: a policy net, one or two Q-nets with target copies, and log(alpha).

Continuous actions: the policy gives the mean and log-std of a Gaussian squashed by tanh;
Q-nets read `concat(obs, action)` and give one value. Discrete actions: the policy gives
logits; Q-nets read `obs` and give one value per action.
"""
from __future__ import annotations

import copy
import math
from typing import List

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfleet.models.fcnet import dense_net
from rlfleet.models.torch_model import TorchModel


class SACModel(TorchModel):
    """All of SAC's trainable state as one module (weights sync and checkpoint as one).

    Args:
        policy_model_config: `{"fcnet_hiddens", "fcnet_activation"}` of the policy net.
        q_model_config: the same for each Q-net.
        twin_q: a second Q-net (and target); the learner uses the minimum of the two.
        initial_alpha: the initial entropy coefficient.
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, policy_model_config: dict,
                 q_model_config: dict, twin_q: bool, initial_alpha: float):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        obs_size = int(np.prod(obs_space.shape))
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        action_size = int(action_space.n) if self.discrete else int(np.prod(action_space.shape))
        self.policy_net = dense_net(obs_size, list(policy_model_config.get("fcnet_hiddens") or []),
                                    policy_model_config.get("fcnet_activation", "relu"), num_outputs)
        q_in = obs_size if self.discrete else obs_size + action_size
        q_out = action_size if self.discrete else 1

        def q_net():
            return dense_net(q_in, list(q_model_config.get("fcnet_hiddens") or []),
                             q_model_config.get("fcnet_activation", "relu"), q_out)

        self.q_net = q_net()
        self.twin_q_net = q_net() if twin_q else None
        self.target_q_net = copy.deepcopy(self.q_net)
        self.target_twin_q_net = copy.deepcopy(self.twin_q_net) if twin_q else None
        for net in (self.target_q_net, self.target_twin_q_net):
            if net is not None:
                for p in net.parameters():
                    p.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(float(initial_alpha)), dtype=torch.float32))

    @staticmethod
    def _flat(obs: torch.Tensor) -> torch.Tensor:
        return obs.reshape(obs.shape[0], -1).float()

    def forward(self, input_dict, state, seq_lens):
        """The policy's action-distribution inputs."""
        return self.policy_net(self._flat(input_dict["obs"])), state

    def policy_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy_net(self._flat(obs))

    def q(self, net: nn.Module, obs: torch.Tensor, actions: torch.Tensor = None) -> torch.Tensor:
        """`net`'s Q(s, a) `[B]` (continuous), or Q(s, .) `[B, n]` (discrete, `actions` unused)."""
        obs = self._flat(obs)
        if self.discrete:
            return net(obs)
        return net(torch.cat([obs, actions.reshape(actions.shape[0], -1).float()], dim=-1)).squeeze(-1)

    def policy_parameters(self):
        return list(self.policy_net.parameters())

    @property
    def q_nets(self) -> List[nn.Module]:
        """The Q-net, and its twin where there is one."""
        return [self.q_net] + ([self.twin_q_net] if self.twin_q_net is not None else [])

    @property
    def target_q_nets(self) -> List[nn.Module]:
        """The target Q-nets, in the order of `q_nets`."""
        return [self.target_q_net] + ([self.target_twin_q_net] if self.target_twin_q_net is not None else [])

    def q_parameters(self):
        return [p for net in self.q_nets for p in net.parameters()]
