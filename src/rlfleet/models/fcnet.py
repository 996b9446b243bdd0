"""Fully connected policy/value network (`fcnet_hiddens`, `vf_share_layers`, `free_log_std`)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import torch
from torch import nn

from rlfleet.fast.mlp import LinearStack, linear_stack
from rlfleet.models.torch_model import TorchModel, pixel_scaling

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "swish": nn.SiLU, "silu": nn.SiLU, "elu": nn.ELU}


def activation_class(name):
    """Maps the config's activation name to a module class (None/"linear" -> identity)."""
    if name in (None, "linear"):
        return None
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"Unknown activation {name!r}; use one of {sorted(_ACTIVATIONS) + ['linear']}"
        )
    return _ACTIVATIONS[name]


def normc_init_(layer: nn.Linear, std: float = 1.0) -> nn.Linear:
    """Gaussian weights rescaled so each output unit's weight vector has norm `std`."""
    with torch.no_grad():
        w = torch.randn_like(layer.weight)
        w *= std / w.norm(dim=1, keepdim=True)
        layer.weight.copy_(w)
        layer.bias.zero_()
    return layer


def mlp(in_size: int, hiddens: List[int], activation) -> nn.Sequential:
    layers = []
    act = activation_class(activation)
    for size in hiddens:
        layers.append(normc_init_(nn.Linear(in_size, size), 1.0))
        if act is not None:
            layers.append(act())
        in_size = size
    return nn.Sequential(*layers)


def dense_net(in_size: int, hiddens: List[int], activation: str, out_size: int) -> nn.Sequential:
    """An MLP with `hiddens` (and `activation`) and a linear output layer."""
    layers: List[nn.Module] = []
    act = activation_class(activation)
    for size in hiddens:
        layers.append(nn.Linear(in_size, size))
        if act is not None:
            layers.append(act())
        in_size = size
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


class FullyConnectedNetwork(TorchModel):
    """An MLP trunk with a logits head and a value head (shared or separate trunk)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        hiddens = list(model_config.get("fcnet_hiddens") or [])
        activation = model_config.get("fcnet_activation", "tanh")
        no_final_linear = model_config.get("no_final_linear", False)
        self.vf_share_layers = bool(model_config.get("vf_share_layers", True))
        self.free_log_std = bool(model_config.get("free_log_std", False))
        in_size = int(np.prod(obs_space.shape))

        # uint8 observations (images kept as bytes) are scaled here: see `pixel_scaling`.
        self.pixels = pixel_scaling(obs_space, model_config)
        if self.free_log_std and num_outputs:
            if num_outputs % 2:
                raise ValueError(f"free_log_std needs an even num_outputs, got {num_outputs}")
            num_outputs //= 2
            self.log_std = nn.Parameter(torch.zeros(num_outputs))

        if no_final_linear and hiddens and num_outputs:
            # The last hidden layer *is* the output layer.
            self.trunk = mlp(in_size, hiddens[:-1] + [num_outputs], activation)
            self.logits = nn.Identity()
            trunk_out = num_outputs
        else:
            self.trunk = mlp(in_size, hiddens, activation)
            trunk_out = hiddens[-1] if hiddens else in_size
            if num_outputs:
                self.logits = normc_init_(nn.Linear(trunk_out, num_outputs), 0.01)
            else:  # feature mode (e.g. under the LSTM wrapper): output the last hidden layer
                self.logits = nn.Identity()
                self.num_outputs = trunk_out

        if self.vf_share_layers:
            self.value_trunk = None
            self.value_head = normc_init_(nn.Linear(trunk_out, 1), 0.01)
        else:
            self.value_trunk = mlp(in_size, hiddens, activation)
            self.value_head = normc_init_(nn.Linear(hiddens[-1] if hiddens else in_size, 1), 0.01)
        self._features = None
        self._obs = None

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"]
        obs = obs.reshape(obs.shape[0], -1).float()
        if self.pixels is not None:
            obs = obs * self.pixels[0] + self.pixels[1]
        self._obs = obs
        self._features = self.trunk(obs)
        out = self.logits(self._features)
        if self.free_log_std and hasattr(self, "log_std"):
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out, state

    def linear_stacks(self) -> Dict[str, Optional[LinearStack]]:
        """The parts' layers for the NumPy fast paths (`rlfleet.fast.mlp`): trunk, logits,
        value head, and the value trunk when the value net is separate (without one the value
        head reads the trunk's features); a part that is no linear stack is None."""
        parts = {"trunk": self.trunk, "logits": self.logits, "value_head": self.value_head}
        if self.value_trunk is not None:
            parts["value_trunk"] = self.value_trunk
        return {name: linear_stack(module) for name, module in parts.items()}

    def log_std_parameter(self) -> Optional[nn.Parameter]:
        """The state-independent log-std appended to the outputs (`free_log_std`), or None."""
        return self.log_std if self.free_log_std and hasattr(self, "log_std") else None

    def value_function(self):
        if self.value_trunk is None:
            return self.value_head(self._features).squeeze(-1)
        return self.value_head(self.value_trunk(self._obs)).squeeze(-1)
