"""RNNSAC's networks: a recurrent actor and one or two recurrent critics, each with a memory of
its own (the catalog's LSTM over its feature net, models/recurrent.py), target copies of the
critics, and log(alpha).

- actor: observations (and, where set, the previous action / reward) -> memory -> a linear
  layer giving the action distribution's inputs;
- critic: the same into its own memory, then an MLP (its `fcnet_hiddens`) on the memory's
  output (and, for Box actions, the action): Q(h, a) `[N]`, or Q(h, .) `[N, n]` for
  Discrete actions.

Only the actor's memory is carried while acting (the policy's state); the critics' memories
start each replayed sequence from zeros and are warmed by its burn-in.
"""
from __future__ import annotations

import copy
import math
from typing import Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfleet.algorithms.common.sequence_learning import recurrent_features
from rlfleet.models.fcnet import dense_net
from rlfleet.models.torch_model import TorchModel


class RecurrentActor(nn.Module):
    """(obs rows, state) -> memory -> action-distribution inputs."""

    def __init__(self, obs_space, action_space, net_config: dict, num_outputs: int, name: str):
        super().__init__()
        self.memory, width = recurrent_features(obs_space, action_space, net_config, name, "RNNSAC")
        self.head = nn.Linear(width, num_outputs)

    def forward(self, input_dict: Dict[str, torch.Tensor], state: List[torch.Tensor],
                seq_lens: Optional[torch.Tensor]) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        features, state_out = self.memory(input_dict, state, seq_lens)
        return self.head(features), state_out


class RecurrentCritic(nn.Module):
    """(obs rows, state) -> memory features; `q(features, actions)` -> Q-values."""

    def __init__(self, obs_space, action_space, net_config: dict, name: str):
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.memory, width = recurrent_features(obs_space, action_space, net_config, name, "RNNSAC")
        action_size = 0 if self.discrete else int(np.prod(action_space.shape))
        out = int(action_space.n) if self.discrete else 1
        self.head = dense_net(width + action_size, list(net_config.get("fcnet_hiddens") or []),
                              net_config.get("fcnet_activation", "relu"), out)

    def forward(self, input_dict, state, seq_lens):
        return self.memory(input_dict, state, seq_lens)

    def q(self, features: torch.Tensor, actions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Q(h, a) `[...]` (Box actions `[..., A]`), or Q(h, .) `[..., n]` (Discrete)."""
        if self.discrete:
            return self.head(features)
        return self.head(torch.cat([features, actions.float()], dim=-1)).squeeze(-1)


class RNNSACModel(TorchModel):
    """All of RNNSAC's trainable state as one module, with the attribute names `SACTorchPolicy`
    reads (`q_net`, `twin_q_net`, their targets, `log_alpha`, the parameter groups).

    Args:
        policy_net_config, q_net_config: each net's full model config (`model` updated with
            `policy_model` / `Q_model`).
        twin_q: a second critic (and target); the learner uses the minimum of the two.
        initial_alpha: the initial entropy coefficient.
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, policy_net_config: dict,
                 q_net_config: dict, twin_q: bool, initial_alpha: float):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.policy_net = RecurrentActor(obs_space, action_space, policy_net_config, num_outputs, f"{name}_policy")
        self.q_net = RecurrentCritic(obs_space, action_space, q_net_config, f"{name}_q")
        self.twin_q_net = RecurrentCritic(obs_space, action_space, q_net_config, f"{name}_twin_q") if twin_q else None
        self.target_q_net = copy.deepcopy(self.q_net)
        self.target_twin_q_net = copy.deepcopy(self.twin_q_net) if twin_q else None
        for net in (self.target_q_net, self.target_twin_q_net):
            for p in net.parameters() if net is not None else ():
                p.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(float(initial_alpha)), dtype=torch.float32))
        # What the sampler must record: every net's feedback inputs (the critics replay them too).
        nets = [self.policy_net, self.q_net] + ([self.twin_q_net] if twin_q else [])
        self.uses_prev_actions = any(net.memory.uses_prev_actions for net in nets)
        self.uses_prev_rewards = any(net.memory.uses_prev_rewards for net in nets)

    def get_initial_state(self) -> List[torch.Tensor]:
        return self.policy_net.memory.get_initial_state()

    def forward(self, input_dict, state, seq_lens):
        """The actor's action-distribution inputs and its memory."""
        return self.policy_net(input_dict, state, seq_lens)

    def policy_parameters(self):
        return list(self.policy_net.parameters())

    def q_parameters(self):
        nets = [self.q_net] + ([self.twin_q_net] if self.twin_q_net is not None else [])
        return [p for net in nets for p in net.parameters()]


__all__ = ["RNNSACModel", "RecurrentActor", "RecurrentCritic"]
