"""A small custom model the tests register or pass as `model.custom_model`."""
from __future__ import annotations

import numpy as np
from torch import nn

from rlfleet.models.torch_model import TorchModel


class TwoLayerModel(TorchModel):
    """A custom actor-critic, not a FullyConnectedNetwork (so it acts and learns with torch):
    one hidden tanh layer of `width` units with policy and value heads."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, width=8):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.body = nn.Sequential(nn.Linear(int(np.prod(obs_space.shape)), width), nn.Tanh())
        self.pi = nn.Linear(width, num_outputs)
        self.vf = nn.Linear(width, 1)
        self._h = None

    def forward(self, input_dict, state, seq_lens):
        self._h = self.body(input_dict["obs"].float())
        return self.pi(self._h), state

    def value_function(self):
        return self.vf(self._h).squeeze(-1)
