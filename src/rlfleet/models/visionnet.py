"""Convolutional policy/value network for image observations (`conv_filters`, `conv_activation`).

Layout: `[H, W, C]` (or `[H, W]`) observations, channels last as Gymnasium envs give them.
uint8 observations travel as uint8 through sampling and learning and are scaled by 1/255
here, on the way into the first conv layer.

Each filter is `[out_channels, kernel, stride]` (kernel and stride an int or `[h, w]`), or
`[out_channels, kernel, stride, padding]` with padding "same" or "valid" (RLlib 2.x's form).
Without a padding, every layer but the last pads "same" (output side = ceil(input / stride))
and the last pads "valid", so the default stacks below shrink the image to 1x1; the Nature
CNN of DQN's and PPO's Atari runs is `[[32, 8, 4, "valid"], [64, 4, 2, "valid"], [64, 3, 1,
"valid"]]` (7x7x64 features). Any remaining spatial
extent is flattened. `post_fcnet_hiddens` adds dense layers after that, then a linear
layer emits `num_outputs` (skipped when `num_outputs` is None: the net then outputs its
features, which is how the LSTM wrapper uses it).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from rlfleet.models.fcnet import activation_class, mlp, normc_init_
from rlfleet.models.torch_model import TorchModel, pixel_scaling

# Default filter stacks by image size (height, width): chosen so that the last, "valid"
# layer sees exactly its kernel size and outputs 1x1.
DEFAULT_FILTERS = {
    # VizDoom (full and half size).
    (480, 640): [[16, [24, 32], [14, 18]], [32, [6, 6], 4], [256, [9, 9], 1]],
    (240, 320): [[16, [12, 16], [7, 9]], [32, [6, 6], 4], [256, [9, 9], 1]],
    # 96x96 (e.g. CarRacing): 96 -> 24 -> 12 -> 1.
    (96, 96): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [12, 12], 1]],
    # Atari after the DeepMind warp: 84 -> 21 -> 11 -> 1.
    (84, 84): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]],
    # 64x64 (Procgen, DM Control renders): 64 -> 32 -> 16 -> 8 -> 1.
    (64, 64): [[32, [4, 4], 2], [64, [4, 4], 2], [128, [4, 4], 2], [256, [8, 8], 1]],
    # Half-size Atari: 42 -> 21 -> 11 -> 1.
    (42, 42): [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]],
    # Small test images: 10 -> 5 -> 1.
    (10, 10): [[16, [5, 5], 2], [32, [5, 5], 2]],
}


def get_filter_config(shape: Sequence[int]) -> list:
    """The default `conv_filters` for an `[H, W, C]` or `[H, W]` observation shape.

    Raises:
        ValueError: naming `conv_filters` when no default exists for the shape.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) in (2, 3) and shape[:2] in DEFAULT_FILTERS:
        return [list(f) for f in DEFAULT_FILTERS[shape[:2]]]
    known = ", ".join(f"{h}x{w}" for h, w in DEFAULT_FILTERS)
    raise ValueError(
        f"No default conv_filters for observation shape {list(shape)}: defaults exist for images of "
        f"{known} (height x width, channels last). Set model.conv_filters to a list of "
        "[out_channels, kernel, stride] triples, e.g. [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]], "
        "resize the images in an env wrapper, or use a custom_model."
    )


def _pair(x) -> Tuple[int, int]:
    if isinstance(x, (list, tuple)):
        if len(x) != 2:
            raise ValueError(f"conv_filters: kernel/stride {x!r} must be an int or a pair [h, w]")
        return int(x[0]), int(x[1])
    return int(x), int(x)


def _same_padding(size: Tuple[int, int], kernel: Tuple[int, int], stride: Tuple[int, int]):
    """(left, right, top, bottom) zero padding that makes the output ceil(size / stride)."""
    pads = []
    for n, k, s in zip(size, kernel, stride):
        out = math.ceil(n / s)
        total = max((out - 1) * s + k - n, 0)
        pads.append((total // 2, total - total // 2))
    (top, bottom), (left, right) = pads
    return (left, right, top, bottom), tuple(math.ceil(n / s) for n, s in zip(size, stride))


def conv_stack(in_shape: Tuple[int, int, int], filters: list, activation, no_final_act: bool = False
               ) -> Tuple[nn.Sequential, Tuple[int, int, int]]:
    """Conv layers for `[C, H, W]` inputs; returns the stack and its `[C, H, W]` output shape."""
    act = activation_class(activation)
    layers: List[nn.Module] = []
    c, h, w = in_shape
    for i, spec in enumerate(filters):
        if not isinstance(spec, (list, tuple)) or len(spec) not in (3, 4):
            raise ValueError(f"conv_filters[{i}] = {spec!r} must be [out_channels, kernel, stride(, padding)]")
        out_c, kernel, stride = int(spec[0]), _pair(spec[1]), _pair(spec[2])
        last = i == len(filters) - 1
        padding = spec[3] if len(spec) == 4 else ("valid" if last else "same")
        if padding == "same":
            pad, (h, w) = _same_padding((h, w), kernel, stride)
            if any(pad):
                layers.append(nn.ZeroPad2d(pad))
        else:
            h, w = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
            if h < 1 or w < 1:
                raise ValueError(
                    f"conv_filters: the layer {spec!r} is larger than its {h + kernel[0] - 1}-pixel-high "
                    "input; shrink its kernel or the strides before it"
                )
        conv = nn.Conv2d(c, out_c, kernel, stride)
        nn.init.xavier_uniform_(conv.weight)
        nn.init.zeros_(conv.bias)
        layers.append(conv)
        if act is not None and not (last and no_final_act):
            layers.append(act())
        c = out_c
    return nn.Sequential(*layers), (c, h, w)


class VisionNetwork(TorchModel):
    """A CNN trunk (+ optional dense layers) with a logits head and a value head.

    Config keys: `conv_filters` (None: chosen by image size, see `DEFAULT_FILTERS`),
    `conv_activation`, `post_fcnet_hiddens`, `post_fcnet_activation`, `vf_share_layers`
    (False: a second conv tower for the value), `free_log_std`, `no_final_linear`.
    With `num_outputs=None` the net's output is its feature vector (`self.num_outputs`
    tells its size).
    """

    def __init__(self, obs_space, action_space, num_outputs: Optional[int], model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        shape = tuple(obs_space.shape)
        if len(shape) not in (2, 3):
            raise ValueError(f"VisionNetwork needs [H, W] or [H, W, C] observations, got shape {list(shape)}")
        filters = model_config.get("conv_filters") or get_filter_config(shape)
        activation = model_config.get("conv_activation", "relu")
        post_hiddens = list(model_config.get("post_fcnet_hiddens") or [])
        post_act = model_config.get("post_fcnet_activation", "relu")
        self.vf_share_layers = bool(model_config.get("vf_share_layers", True))
        self.free_log_std = bool(model_config.get("free_log_std", False))
        no_final_linear = bool(model_config.get("no_final_linear", False)) and bool(num_outputs)
        # uint8 observations (images kept as bytes) are scaled here: see `pixel_scaling`.
        self.pixels = pixel_scaling(obs_space, model_config)
        in_shape = (shape[2] if len(shape) == 3 else 1, shape[0], shape[1])

        if self.free_log_std and num_outputs:
            if num_outputs % 2:
                raise ValueError(f"free_log_std needs an even num_outputs, got {num_outputs}")
            num_outputs //= 2
            self.log_std = nn.Parameter(torch.zeros(num_outputs))

        if no_final_linear:
            # The last conv layer emits the action outputs itself (and must end at 1x1).
            filters = [list(f) for f in filters[:-1]] + [[num_outputs, *filters[-1][1:]]]
        self.convs, out_shape = conv_stack(in_shape, filters, activation, no_final_act=no_final_linear)
        if no_final_linear and out_shape[1:] != (1, 1):
            raise ValueError(
                f"no_final_linear needs conv_filters whose last layer outputs 1x1, got {out_shape[1]}x{out_shape[2]}"
            )
        feat = int(np.prod(out_shape))
        self.post = mlp(feat, post_hiddens, post_act)
        feat = post_hiddens[-1] if post_hiddens else feat
        if no_final_linear:
            self.logits = nn.Identity()
        elif num_outputs:
            self.logits = normc_init_(nn.Linear(feat, num_outputs), 0.01)
        else:
            self.logits = nn.Identity()
            self.num_outputs = feat
        value_in = feat
        if self.vf_share_layers:
            self.value_convs = None
        else:
            self.value_convs, vshape = conv_stack(in_shape, filters, activation)
            value_in = int(np.prod(vshape))
        self.value_head = normc_init_(nn.Linear(value_in, 1), 0.01)
        self._features: Optional[torch.Tensor] = None
        self._images: Optional[torch.Tensor] = None

    def _to_images(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()
        if self.pixels is not None:
            x = x * self.pixels[0] + self.pixels[1]
        if x.dim() == 3:  # [B, H, W] grayscale
            return x.unsqueeze(1)
        return x.permute(0, 3, 1, 2)  # [B, H, W, C] -> [B, C, H, W]

    def forward(self, input_dict, state, seq_lens):
        images = self._to_images(input_dict["obs"])
        self._images = images
        feats = self.convs(images).flatten(1)
        self._features = self.post(feats)
        out = self.logits(self._features)
        if self.free_log_std and hasattr(self, "log_std"):
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out, state

    def value_function(self):
        if self.value_convs is None:
            return self.value_head(self._features).squeeze(-1)
        return self.value_head(self.value_convs(self._images).flatten(1)).squeeze(-1)


__all__ = ["VisionNetwork", "get_filter_config", "DEFAULT_FILTERS", "conv_stack"]
