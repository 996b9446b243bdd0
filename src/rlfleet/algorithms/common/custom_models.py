"""`model.custom_model` for algorithms that build their own networks.

DQN (and SimpleQ, APEX) builds the user's model as the Q-network's base, as RLlib 1.x's DQN
does (`build_q_model`), so custom models written for it fit: the custom model turns observations
into `num_outputs` features and the algorithm adds its Q heads (dueling, distributional, noisy)
on top. The width of those features is RLlib 1.x's choice: the last of `[256] + fcnet_hiddens`
when the heads have `hiddens`, else the number of actions.

SAC, CQL, DDPG, TD3 and APEX_DDPG build their policy and Q networks from their own keys
(`policy_model` / `Q_model`, `actor_hiddens` / `critic_hiddens`); a custom model there would be
silently ignored, so `refuse_custom_model` stops with a message that names the key.
"""
from __future__ import annotations

from typing import List

import gymnasium as gym
import torch
from torch import nn

from rlfleet.models.catalog import ModelCatalog


def custom_trunk_width(model_config: dict, hiddens: List[int], num_actions: int) -> int:
    """The number of features the custom model must output under DQN's Q heads."""
    if hiddens:
        return int(([256] + list(model_config.get("fcnet_hiddens") or []))[-1])
    return int(num_actions)


class CustomModelTrunk(nn.Module):
    """The user's custom model (built by the catalog) as a plain obs -> features module.

    Args:
        obs_space: the observation space the model sees.
        action_space: the policy's action space.
        model_config: the `model` sub-config (holding `custom_model`, `custom_model_config`).
        out_size: the number of features the model outputs (its `num_outputs`).
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, model_config: dict, out_size: int):
        super().__init__()
        self.net = ModelCatalog.get_model(obs_space, action_space, out_size, model_config, "q_trunk")
        self.out_size = int(out_size)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features, _ = self.net({"obs": obs}, [], None)
        return features


def refuse_custom_model(model_config: dict, algorithm: str, own_keys: str) -> None:
    """Raises when `model.custom_model` is set for an algorithm that cannot use it.

    Args:
        model_config: the `model` sub-config.
        algorithm: the algorithm's name(s), for the message.
        own_keys: the keys that configure the algorithm's networks instead.

    Raises:
        ValueError: `model.custom_model` is set.
    """
    custom = model_config.get("custom_model")
    if custom:
        raise ValueError(
            f"model.custom_model={custom!r} is not supported by {algorithm}: it builds its own policy and Q "
            f"networks from {own_keys}. Remove model.custom_model (configure those keys instead), or use an "
            f"algorithm that takes a custom model (PPO, PG, A2C, A3C, IMPALA, APPO, MARWIL, BC, DQN, APEX)."
        )
