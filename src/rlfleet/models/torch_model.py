"""The model interface every policy network implements (RLlib 1.x's `ModelV2` shape, so its models port).

A custom model subclasses `TorchModel` and implements `forward` and `value_function`;
register it with `ModelCatalog.register_custom_model(name, cls)` and select it with
`config["model"]["custom_model"] = name`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

import gymnasium as gym
import torch
from torch import nn


def pixel_scaling(obs_space: gym.Space, model_config: dict) -> Optional[Tuple[float, float]]:
    """How a model turns uint8 pixels into floats: `(scale, shift)` for `x * scale + shift`.

    `model.zero_mean` (default True) maps 0..255 to [-1, 1]; False maps it to [0, 1]. Other
    observations are used as they come (None).
    """
    if np.dtype(obs_space.dtype) != np.uint8:
        return None
    if model_config.get("zero_mean", True):
        return 2.0 / 255.0, -1.0
    return 1.0 / 255.0, 0.0


class TorchModel(nn.Module):
    """Base class for policy models.

    Args:
        obs_space: the (preprocessed, flat) observation space the model sees.
        action_space: the policy's action space.
        num_outputs: size of the action-distribution input the model must produce.
        model_config: the `model` sub-config.
        name: a name for the model.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str,
    ):
        super().__init__()
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = model_config
        self.name = name

    def forward(
        self, input_dict: Dict[str, torch.Tensor], state: List[torch.Tensor], seq_lens: Optional[torch.Tensor]
    ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """Returns the action-distribution inputs `[B, num_outputs]` and the new state."""
        raise NotImplementedError  # abstract

    def value_function(self) -> torch.Tensor:
        """Returns `[B]` state values for the last `forward` call.

        Models without a state-value head (Q-networks, actor-critics whose critics are
        Q-functions) simply do not override it; see `has_value_function`.
        """
        raise NotImplementedError  # abstract

    @property
    def has_value_function(self) -> bool:
        """Whether this model overrides `value_function` (export includes the value only then)."""
        return type(self).value_function is not TorchModel.value_function

    def get_initial_state(self) -> List[torch.Tensor]:
        return []

    def custom_loss(self, policy_loss: torch.Tensor, loss_inputs) -> torch.Tensor:
        """Override to add a model-specific term to the policy's loss."""
        return policy_loss

    def metrics(self) -> Dict[str, float]:
        return {}
