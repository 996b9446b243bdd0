"""DQN's networks: an MLP trunk (the catalog's CNN for image observations, the user's model for
`model.custom_model`), then (dueling) Q heads, optionally noisy and distributional.

- Dueling (Wang et al. 2016): Q = V + A - mean_a A.
- Noisy nets (Fortunato et al. 2018): factorised Gaussian noise on the head layers'
  weights, with sigma initialised to `sigma0 / sqrt(fan_in)`; noise comes from the
  policy's own torch generator and is off when acting greedily.
- Distributional C51 (Bellemare et al. 2017): each action's head gives `num_atoms` logits
  over the fixed support `linspace(v_min, v_max, num_atoms)`; Q is the mean.
"""
from __future__ import annotations

import copy
import math
from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

from rlfleet.algorithms.common.custom_models import CustomModelTrunk, custom_trunk_width
from rlfleet.models.action_mask import mask_layout
from rlfleet.models.fcnet import mlp
from rlfleet.models.torch_model import TorchModel


class NoisyLinear(nn.Module):
    """Linear layer with factorised Gaussian weight noise: W = mu_W + sigma_W * (f(e_out) f(e_in)^T),
    f(x) = sign(x) sqrt(|x|), with fresh e_in, e_out on every forward while `noisy` is on."""

    def __init__(self, in_size: int, out_size: int, sigma0: float):
        super().__init__()
        bound = 1.0 / math.sqrt(in_size)
        self.weight_mu = nn.Parameter(torch.empty(out_size, in_size).uniform_(-bound, bound))
        self.bias_mu = nn.Parameter(torch.empty(out_size).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_size, in_size), sigma0 / math.sqrt(in_size)))
        self.bias_sigma = nn.Parameter(torch.full((out_size,), sigma0 / math.sqrt(in_size)))
        self.noisy = True
        self.generator: Optional[torch.Generator] = None

    @staticmethod
    def _f(x: torch.Tensor) -> torch.Tensor:
        return x.sign() * x.abs().sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.noisy:
            return F.linear(x, self.weight_mu, self.bias_mu)
        out_size, in_size = self.weight_mu.shape
        e_in = self._f(torch.randn(in_size, generator=self.generator))
        e_out = self._f(torch.randn(out_size, generator=self.generator))
        weight = self.weight_mu + self.weight_sigma * torch.outer(e_out, e_in)
        bias = self.bias_mu + self.bias_sigma * e_out
        return F.linear(x, weight, bias)


def _head(in_size: int, hiddens: List[int], out_size: int, noisy: bool, sigma0: float) -> nn.Sequential:
    layers: List[nn.Module] = []
    for size in hiddens:
        layers += [NoisyLinear(in_size, size, sigma0) if noisy else nn.Linear(in_size, size), nn.ReLU()]
        in_size = size
    layers.append(NoisyLinear(in_size, out_size, sigma0) if noisy else nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


class QNetwork(nn.Module):
    """obs -> trunk (`fcnet_hiddens`, `fcnet_activation`) -> heads (`hiddens`, ReLU).

    Args:
        obs_size: flat observation size.
        num_actions: number of discrete actions.
        fcnet_hiddens, fcnet_activation: the trunk (the `model` sub-config).
        hiddens: hidden layers of each head (advantage and, if dueling, value).
        dueling: separate value and advantage streams.
        num_atoms: > 1 for a distributional (C51) head.
        noisy, sigma0: noisy head layers.
    """

    def __init__(self, obs_size: int, num_actions: int, *, fcnet_hiddens: List[int], fcnet_activation: str,
                 hiddens: List[int], dueling: bool, num_atoms: int, noisy: bool, sigma0: float,
                 trunk: Optional[nn.Module] = None):
        super().__init__()
        self.num_actions = num_actions
        self.num_atoms = num_atoms
        self.dueling = dueling
        # `trunk`: a ready feature module (the CNN for image observations, see ImageTrunk)
        # that takes the observations as they are; else an MLP on flattened observations.
        self.flatten = trunk is None
        if trunk is None:
            self.trunk = mlp(obs_size, list(fcnet_hiddens), fcnet_activation)
            trunk_out = fcnet_hiddens[-1] if fcnet_hiddens else obs_size
        else:
            self.trunk, trunk_out = trunk, int(trunk.out_size)
        self.advantage = _head(trunk_out, list(hiddens), num_actions * num_atoms, noisy, sigma0)
        self.value = _head(trunk_out, list(hiddens), num_atoms, noisy, sigma0) if dueling else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """`[B, A]` Q-values for num_atoms 1, else `[B, A, num_atoms]` support logits."""
        features = self.trunk(obs.reshape(obs.shape[0], -1).float() if self.flatten else obs)
        adv = self.advantage(features)
        if self.num_atoms > 1:
            adv = adv.reshape(-1, self.num_actions, self.num_atoms)
        if not self.dueling:
            return adv
        value = self.value(features)
        if self.num_atoms > 1:
            value = value.unsqueeze(1)
        return value + adv - adv.mean(dim=1, keepdim=True)


class ImageTrunk(nn.Module):
    """The catalog's VisionNetwork (`conv_filters`, `conv_activation`, `post_fcnet_hiddens`;
    uint8 images scaled inside) in feature mode, as a plain obs -> features module."""

    def __init__(self, obs_space, action_space, model_config: dict):
        super().__init__()
        from rlfleet.models.visionnet import VisionNetwork

        self.net = VisionNetwork(obs_space, action_space, None, dict(model_config, vf_share_layers=True), "q_trunk")
        self.net.value_head = None  # Q-heads only
        self.out_size = int(self.net.num_outputs)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net({"obs": obs}, [], None)[0]


def _is_image(obs_space, model_config: dict) -> bool:
    shape = tuple(getattr(obs_space, "shape", None) or ())
    return len(shape) == 3 or (len(shape) == 2 and bool(model_config.get("conv_filters")))


class DQNModel(TorchModel):
    """The online Q-network and its target copy, as one module (one set of weights to sync
    and checkpoint). `forward` gives the online Q-values the policy acts on."""

    # The network `forward` acts with (ParameterNoise perturbs its weights).
    acting_net = "q_net"

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, q_config: dict):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.num_atoms = int(q_config["num_atoms"])
        # With an action mask in the observation, the nets see the rest and illegal Q-values
        # are masked (for acting and for the target's argmax).
        self.mask_layout = mask_layout(obs_space, action_space, model_config)
        if self.mask_layout is not None:
            self.register_buffer("rest_index", torch.as_tensor(self.mask_layout.rest_index, dtype=torch.long),
                                 persistent=False)
            obs_space = self.mask_layout.rest_space
        hiddens = list(q_config["hiddens"] or [])
        self.custom_trunk = bool(model_config.get("custom_model"))
        if self.custom_trunk:  # the user's model gives the features, the Q heads go on top
            width = custom_trunk_width(model_config, hiddens, int(action_space.n))
            trunk = CustomModelTrunk(obs_space, action_space, model_config, width)
        elif _is_image(obs_space, model_config):
            trunk = ImageTrunk(obs_space, action_space, model_config)
        else:
            trunk = None
        self.q_net = QNetwork(
            int(np.prod(obs_space.shape)), int(action_space.n),
            fcnet_hiddens=list(model_config.get("fcnet_hiddens") or []),
            fcnet_activation=model_config.get("fcnet_activation", "tanh"),
            hiddens=hiddens, dueling=bool(q_config["dueling"]),
            num_atoms=self.num_atoms, noisy=bool(q_config["noisy"]), sigma0=float(q_config["sigma0"]), trunk=trunk,
        )
        self.target_q_net = copy.deepcopy(self.q_net)
        for p in self.target_q_net.parameters():
            p.requires_grad_(False)
        # A plain list (not registered as submodules twice): set_noise runs on every act.
        self._noisy_layers = [m for m in self.modules() if isinstance(m, NoisyLinear)]
        self.register_buffer("support", torch.linspace(float(q_config["v_min"]), float(q_config["v_max"]),
                                                       self.num_atoms), persistent=False)

    def set_noise(self, on: bool, generator: Optional[torch.Generator] = None) -> None:
        """Switches the noisy layers' noise on or off (and sets their generator)."""
        for m in self._noisy_layers:
            m.noisy = on
            if generator is not None:
                m.generator = generator

    def q_values(self, net: nn.Module, obs: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """`(Q [B, A], support logits [B, A, atoms] or None)` of `net` (online or target)."""
        mask = None
        if self.mask_layout is not None:
            obs, mask = self.mask_layout.split(obs, self.rest_index)
        out = net(obs)
        q, logits = (out, None) if self.num_atoms == 1 else ((F.softmax(out, dim=-1) * self.support).sum(-1), out)
        return (q if mask is None else self.mask_layout.apply(q, mask)), logits

    def forward(self, input_dict, state, seq_lens):
        q, _ = self.q_values(self.q_net, input_dict["obs"])
        return q, state
