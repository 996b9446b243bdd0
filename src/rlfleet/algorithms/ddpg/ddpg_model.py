"""DDPG/TD3 networks: a deterministic actor, one or two critics, and target copies of all."""
from __future__ import annotations

import copy
from typing import List

import numpy as np
import torch
from torch import nn

from rlfleet.models.fcnet import dense_net
from rlfleet.models.torch_model import TorchModel


class DDPGModel(TorchModel):
    """Actor `obs -> action` (tanh onto the action bounds), critics `(obs, action) -> Q`.

    Args:
        low, high: the action bounds the actor maps onto (infinite: a linear output).
        actor_hiddens, actor_hidden_activation: the actor's hidden layers.
        critic_hiddens, critic_hidden_activation: each critic's hidden layers.
        twin_q: a second critic (clipped double Q).
    """

    # The network `forward` acts with (ParameterNoise perturbs its weights).
    acting_net = "actor"

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, low: np.ndarray,
                 high: np.ndarray, actor_hiddens: List[int], actor_hidden_activation: str,
                 critic_hiddens: List[int], critic_hidden_activation: str, twin_q: bool):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        obs_size = int(np.prod(obs_space.shape))
        act_size = int(np.prod(action_space.shape))
        self.bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
        self.register_buffer("low", torch.as_tensor(low, dtype=torch.float32), persistent=False)
        self.register_buffer("high", torch.as_tensor(high, dtype=torch.float32), persistent=False)
        self.actor = dense_net(obs_size, list(actor_hiddens), actor_hidden_activation, act_size)

        def critic():
            return dense_net(obs_size + act_size, list(critic_hiddens), critic_hidden_activation, 1)

        self.critic = critic()
        self.twin_critic = critic() if twin_q else None
        self.target_actor = copy.deepcopy(self.actor)
        self.target_critic = copy.deepcopy(self.critic)
        self.target_twin_critic = copy.deepcopy(self.twin_critic) if twin_q else None
        for net in (self.target_actor, self.target_critic, self.target_twin_critic):
            if net is not None:
                for p in net.parameters():
                    p.requires_grad_(False)

    @staticmethod
    def _flat(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1).float()

    def act(self, net: nn.Module, obs: torch.Tensor) -> torch.Tensor:
        """`net`'s (online or target actor's) actions within the bounds."""
        out = net(self._flat(obs))
        if not self.bounded:
            return out
        return self.low + (torch.tanh(out) + 1.0) * 0.5 * (self.high - self.low)

    def q(self, net: nn.Module, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """`net`'s Q(s, a), `[B]`."""
        return net(torch.cat([self._flat(obs), self._flat(actions)], dim=-1)).squeeze(-1)

    def forward(self, input_dict, state, seq_lens):
        return self.act(self.actor, input_dict["obs"]), state

    def actor_parameters(self):
        return list(self.actor.parameters())

    def critic_parameters(self):
        nets = [self.critic] + ([self.twin_critic] if self.twin_critic is not None else [])
        return [p for net in nets for p in net.parameters()]
