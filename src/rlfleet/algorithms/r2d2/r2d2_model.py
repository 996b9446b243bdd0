"""R2D2's networks: the catalog's recurrent model (`use_lstm`: LSTM, `use_attention`: GTrXL)
over the usual feature model, then DQN's (dueling) Q heads on the memory's output; and a
target copy of the whole thing.

Inputs follow the recurrent wrappers' convention (models/recurrent.py): flat rows `[N, ...]`
with N = B * T for B sequences of T rows (`seq_lens` `[B]`), one row per sequence when
acting (`seq_lens` None); `state` is the memory at each sequence's start.
"""
from __future__ import annotations

import copy
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn

from rlfleet.algorithms.dqn.dqn_model import QNetwork
from rlfleet.algorithms.common.sequence_learning import recurrent_features
from rlfleet.models.torch_model import TorchModel


class _Features(nn.Identity):
    """The memory's output as `QNetwork`'s ready trunk (it reads `out_size`)."""

    def __init__(self, out_size: int):
        super().__init__()
        self.out_size = out_size


class RecurrentQNetwork(nn.Module):
    """(obs rows, state) -> memory -> Q heads.

    Args:
        obs_space, action_space: the policy's spaces (Discrete actions).
        model_config: the `model` sub-config (with `use_lstm` or `use_attention`).
        q_config: `hiddens` and `dueling` of the heads.
        name: the model's name.
    """

    def __init__(self, obs_space, action_space, model_config: dict, q_config: dict, name: str):
        super().__init__()
        num_actions = int(action_space.n)
        self.memory, width = recurrent_features(obs_space, action_space, model_config, name, "R2D2")
        self.heads = QNetwork(width, num_actions, fcnet_hiddens=[], fcnet_activation="linear",
                              hiddens=list(q_config["hiddens"] or []), dueling=bool(q_config["dueling"]),
                              num_atoms=1, noisy=False, sigma0=0.0, trunk=_Features(width))

    def forward(self, input_dict: Dict[str, torch.Tensor], state: List[torch.Tensor],
                seq_lens: Optional[torch.Tensor]) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """`(Q [N, A], state after each sequence)`."""
        features, state_out = self.memory(input_dict, state, seq_lens)
        return self.heads(features), state_out


class R2D2Model(TorchModel):
    """The online recurrent Q-network and its target copy, as one module (one set of weights to
    sync and checkpoint). `forward` gives the online Q-values the policy acts on."""

    acting_net = "q_net"

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, q_config: dict):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.q_net = RecurrentQNetwork(obs_space, action_space, model_config, q_config, name)
        self.target_q_net = copy.deepcopy(self.q_net)
        for p in self.target_q_net.parameters():
            p.requires_grad_(False)
        self.uses_prev_actions = self.q_net.memory.uses_prev_actions
        self.uses_prev_rewards = self.q_net.memory.uses_prev_rewards

    def get_initial_state(self) -> List[torch.Tensor]:
        return self.q_net.memory.get_initial_state()

    def forward(self, input_dict, state, seq_lens):
        return self.q_net(input_dict, state, seq_lens)


__all__ = ["R2D2Model", "RecurrentQNetwork"]
