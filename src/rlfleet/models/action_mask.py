"""Built-in action masking.

When the env's observation is a Dict holding an action mask (`model.action_mask_key`,
default `"action_mask"`: 1 = legal, 0 = illegal, one entry per Discrete action or per
MultiDiscrete choice), the model sees the rest of the observation and illegal actions get
the lowest float as logit (probability 0; for Q-learning, never the argmax and never drawn
by epsilon-greedy). A row whose mask allows nothing (the last observation of a finished game)
stays unmasked, so no target turns into -3e38.

The policy sees the flattened observation (a Box); the preprocessor records the Dict it came
from as `original_space` on that Box, which is how a model finds the mask's columns.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

import gymnasium as gym
import numpy as np
import torch

from rlfleet.models.preprocessors import DictFlatteningPreprocessor
from rlfleet.models.torch_model import TorchModel

FLOAT_MIN = float(torch.finfo(torch.float32).min)


class MaskLayout:
    """Where the mask sits in the flattened observation, and what the model sees instead.

    Args:
        obs_space: the flattened Box (with `original_space`, the Dict).
        action_space: Discrete or MultiDiscrete.
        key: the mask's key in the Dict.
        conv_filters: `model.conv_filters`; when set and the rest is one 2-D or 3-D Box, the
            model sees the rest in that Box's shape (else as a flat vector).
    """

    def __init__(self, obs_space: gym.spaces.Box, action_space: gym.Space, key: str, conv_filters=None):
        original = obs_space.original_space
        columns = DictFlatteningPreprocessor(original).column_slices()
        self.mask = columns[key]
        size = self.mask.stop - self.mask.start
        if isinstance(action_space, gym.spaces.Discrete):
            self.groups = [int(action_space.n)]
        elif isinstance(action_space, gym.spaces.MultiDiscrete):
            self.groups = [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]
        else:
            raise ValueError(
                f"The observation holds an action mask under {key!r}, but the action space is {action_space}: "
                "masking needs Discrete or MultiDiscrete actions. Remove the mask from the observation, or "
                "set 'model.action_mask_key' to a key the observation does not have")
        if size != sum(self.groups):
            raise ValueError(
                f"The action mask {key!r} has {size} entries, but the action space {action_space} has "
                f"{sum(self.groups)} choices: the mask needs one entry (1 legal, 0 illegal) per choice")
        rest = np.ones(obs_space.shape[0], bool)
        rest[self.mask] = False
        self.rest_index = np.flatnonzero(rest)
        low = np.asarray(obs_space.low, np.float32).reshape(-1)[self.rest_index]
        high = np.asarray(obs_space.high, np.float32).reshape(-1)[self.rest_index]
        # One image-like entry beside the mask (connect four's [6, 7, 2] board) keeps its shape
        # when a conv net is asked for, so `conv_filters` see rows and columns, not a vector.
        others = [space for name, space in original.spaces.items() if name != key]
        self.rest_shape, dtype = (len(self.rest_index),), np.float32
        if (len(others) == 1 and isinstance(others[0], gym.spaces.Box) and len(others[0].shape) in (2, 3)
                and conv_filters):
            self.rest_shape = tuple(int(n) for n in others[0].shape)
            # uint8 pixels arrive as floats 0..255: a uint8 space lets the vision net scale them
            # (`model.zero_mean`) as it does a plain image observation.
            dtype = np.uint8 if others[0].dtype == np.uint8 else np.float32
        self.rest_space = gym.spaces.Box(low.reshape(self.rest_shape), high.reshape(self.rest_shape), dtype=dtype)

    def split(self, obs: torch.Tensor, rest_index: torch.Tensor):
        """`(rest [B, *rest_shape], mask [B, M])` of a batch of flattened observations."""
        flat = obs.reshape(obs.shape[0], -1).float()
        rest = flat.index_select(1, rest_index)
        if len(self.rest_shape) > 1:
            rest = rest.reshape(obs.shape[0], *self.rest_shape)
        return rest, flat[:, self.mask]

    def apply(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`values` ([B, choices]: logits or Q-values) with the illegal entries at FLOAT_MIN."""
        allowed = mask > 0.5
        parts = []
        for group in torch.split(allowed, self.groups, dim=-1):
            # A row (of one component) that allows nothing stays unmasked.
            parts.append(group | ~group.any(-1, keepdim=True))
        return values.masked_fill(~torch.cat(parts, -1), FLOAT_MIN)


def mask_layout(obs_space: gym.Space, action_space: gym.Space, model_config: dict) -> Optional[MaskLayout]:
    """The MaskLayout when the observation holds an action mask, else None."""
    original = getattr(obs_space, "original_space", None)
    key = model_config.get("action_mask_key") or "action_mask"
    if not isinstance(original, gym.spaces.Dict) or key not in original.spaces:
        return None
    return MaskLayout(obs_space, action_space, key, model_config.get("conv_filters"))


class ActionMaskModel(TorchModel):
    """Any model, fed the observation without the mask, with its outputs masked.

    Args:
        layout: where the mask is (from `mask_layout`).
        build_inner: `rest_space -> model` (the model the config asks for, on the rest).
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, layout: MaskLayout,
                 build_inner: Callable[[gym.Space], TorchModel]):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.layout = layout
        self.inner = build_inner(layout.rest_space)
        self.register_buffer("rest_index", torch.as_tensor(layout.rest_index, dtype=torch.long), persistent=False)

    def forward(self, input_dict, state, seq_lens):
        rest, mask = self.layout.split(input_dict["obs"], self.rest_index)
        out, state = self.inner({**input_dict, "obs": rest}, state, seq_lens)
        return self.layout.apply(out, mask), state

    def value_function(self) -> torch.Tensor:
        return self.inner.value_function()

    @property
    def has_value_function(self) -> bool:
        return self.inner.has_value_function

    def get_initial_state(self) -> List[torch.Tensor]:
        return self.inner.get_initial_state()

    def custom_loss(self, policy_loss, loss_inputs):
        return self.inner.custom_loss(policy_loss, loss_inputs)

    def metrics(self):
        return self.inner.metrics()

    def __getattr__(self, name: str) -> Any:
        # What the policy asks of recurrent models (`uses_prev_actions`, ...) is the inner model's.
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("inner"), name)
