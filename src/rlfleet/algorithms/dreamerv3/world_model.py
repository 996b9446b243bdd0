"""DreamerV3's world model: an encoder (MLP for vector observations, CNN for images), the RSSM
(a GRU over the deterministic state h and discrete latents z of `num_latents` categoricals of
`num_classes` classes, straight-through sampled, 1% unimix), and the heads trained from its
features [h, z]: the decoder, the two-hot reward head and the continue head.

Shapes: B batch rows; `deter` the GRU width; `S * C` the flattened latent.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.algorithms.dreamerv3.losses import NUM_BINS, symlog, unimix_logits

# The paper's model sizes (arXiv:2301.04104, table of model sizes): GRU units, dense units,
# dense layers, CNN depth multiplier.
MODEL_SIZES: Dict[str, Tuple[int, int, int, int]] = {
    "XS": (256, 256, 1, 24), "S": (512, 512, 2, 32), "M": (1024, 640, 3, 48),
    "L": (2048, 768, 4, 64), "XL": (4096, 1024, 5, 96),
    # Not the paper's: a tiny size for smoke tests and golden checkpoints (as RLlib 2.x's
    # debugging sizes), which nobody should train with.
    "nano": (32, 32, 1, 4),
}


def mlp(inputs: int, units: int, layers: int, outputs: int, zero_last: bool = False) -> nn.Sequential:
    """`layers` x (Linear, LayerNorm, SiLU), then a Linear to `outputs` (zero-initialised for
    the reward and critic heads, as the paper does, so their first predictions are 0)."""
    mods: List[nn.Module] = []
    width = inputs
    for _ in range(layers):
        mods += [nn.Linear(width, units), nn.LayerNorm(units), nn.SiLU()]
        width = units
    last = nn.Linear(width, outputs)
    if zero_last:
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
    return nn.Sequential(*mods, last)


def is_image_space(space: gym.Space) -> bool:
    """Rank-3 Box observations (H, W, C) go through the CNN."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def check_observation_space(space: gym.Space) -> None:
    """DreamerV3 here reads flat vectors (MLP) or square images of side divisible by 16 (CNN)."""
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"DreamerV3 needs a Box observation space (a vector or an (H, W, C) image), got {space}; "
                         "flatten Dict/Tuple observations into one Box with a wrapper")
    if len(space.shape) == 3:
        h, w, _ = space.shape
        if h != w or h % 16 != 0:
            raise ValueError(f"DreamerV3's CNN needs square images with a side divisible by 16 (e.g. 64x64), got "
                             f"{space.shape}; resize them with a wrapper")
    elif len(space.shape) != 1:
        raise ValueError(f"DreamerV3 needs vector (rank 1) or image (H, W, C) observations, got shape {space.shape}; "
                         "flatten them with a wrapper")


class Encoder(nn.Module):
    """Observations -> embedding. Vectors: symlog, then an MLP; images: scaled to [-0.5, 0.5],
    then 4 stride-2 convolutions of depth mult * (1, 2, 4, 8)."""

    def __init__(self, space: gym.spaces.Box, units: int, layers: int, mult: int):
        super().__init__()
        self.image = is_image_space(space)
        if self.image:
            h, _, c = space.shape
            self.pixel_scale = 255.0 if float(np.max(space.high)) > 1.0 else 1.0
            chans = [c, mult, 2 * mult, 4 * mult, 8 * mult]
            convs: List[nn.Module] = []
            for a, b in zip(chans[:-1], chans[1:]):
                convs += [nn.Conv2d(a, b, 4, 2, 1), nn.GroupNorm(1, b), nn.SiLU()]
            self.net = nn.Sequential(*convs, nn.Flatten())
            self.out_size = 8 * mult * (h // 16) ** 2
        else:
            self.net = mlp(int(space.shape[0]), units, layers, units)
            self.out_size = units

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.image:
            x = obs.float() / self.pixel_scale - 0.5
            return self.net(x.permute(0, 3, 1, 2))
        return self.net(symlog(obs.float()))


class Decoder(nn.Module):
    """Features -> the observation's reconstruction: symlog space for vectors, [-0.5, 0.5]
    pixels for images (transposed convolutions mirroring the encoder)."""

    def __init__(self, space: gym.spaces.Box, feat: int, units: int, layers: int, mult: int):
        super().__init__()
        self.image = is_image_space(space)
        self.shape = tuple(space.shape)
        if self.image:
            h, _, c = space.shape
            self.side = h // 16
            self.mult = mult
            self.inp = nn.Linear(feat, 8 * mult * self.side ** 2)
            chans = [8 * mult, 4 * mult, 2 * mult, mult]
            mods: List[nn.Module] = []
            for a, b in zip(chans[:-1], chans[1:]):
                mods += [nn.ConvTranspose2d(a, b, 4, 2, 1), nn.GroupNorm(1, b), nn.SiLU()]
            self.net = nn.Sequential(*mods, nn.ConvTranspose2d(mult, c, 4, 2, 1))
        else:
            self.net = mlp(feat, units, layers, int(space.shape[0]))

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        if self.image:
            x = self.inp(feat).reshape(-1, 8 * self.mult, self.side, self.side)
            return self.net(x).permute(0, 2, 3, 1)
        return self.net(feat)

    def target(self, obs: torch.Tensor, encoder: Encoder) -> torch.Tensor:
        """What the reconstruction is compared with (MSE): symlog vectors, scaled pixels."""
        if self.image:
            return obs.float() / encoder.pixel_scale - 0.5
        return symlog(obs.float())


class RSSM(nn.Module):
    """The recurrent state-space model: `img_step` (prior: h_t = GRU(h_{t-1}, [z_{t-1}, a_{t-1}]),
    z_t ~ prior(h_t)) and `obs_step` (posterior z_t ~ q(h_t, embed_t)).

    Args:
        action_size: one-hot width (Discrete) or action dimensions (Box).
        embed: the encoder's output width.
    """

    def __init__(self, action_size: int, embed: int, deter: int, units: int, num_latents: int, num_classes: int,
                 unimix: float):
        super().__init__()
        self.deter, self.num_latents, self.num_classes, self.unimix = deter, num_latents, num_classes, unimix
        stoch = num_latents * num_classes
        self.img_in = nn.Sequential(nn.Linear(stoch + action_size, units), nn.LayerNorm(units), nn.SiLU())
        self.gru = nn.GRUCell(units, deter)
        self.prior = mlp(deter, units, 1, stoch)
        self.post = mlp(deter + embed, units, 1, stoch)

    @property
    def feat_size(self) -> int:
        return self.deter + self.num_latents * self.num_classes

    def _logits(self, raw: torch.Tensor) -> torch.Tensor:
        return unimix_logits(raw.reshape(*raw.shape[:-1], self.num_latents, self.num_classes), self.unimix)

    def sample(self, logits: torch.Tensor, generator=None, mode: bool = False) -> torch.Tensor:
        """A one-hot `[..., S * C]` draw (or the argmax with `mode`) with straight-through
        gradients (paper section 2)."""
        probs = logits.exp()
        if mode:
            idx = probs.argmax(-1)
        else:
            flat = probs.reshape(-1, self.num_classes)
            idx = torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])
        onehot = F.one_hot(idx, self.num_classes).to(probs.dtype)
        return (onehot + probs - probs.detach()).flatten(-2)

    def img_step(self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
        """`(h_t, prior logits [B, S, C])` from h_{t-1}, z_{t-1}, a_{t-1}."""
        h = self.gru(self.img_in(torch.cat([z, action], -1)), h)
        return h, self._logits(self.prior(h))

    def obs_step(self, h: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
        """The posterior logits `[B, S, C]` of z_t given h_t and the observation's embedding."""
        return self._logits(self.post(torch.cat([h, embed], -1)))


class WorldModel(nn.Module):
    """Encoder, RSSM, decoder, reward head (two-hot, 255 bins) and continue head (Bernoulli)."""

    def __init__(self, obs_space: gym.spaces.Box, action_size: int, size: str, num_latents: int, num_classes: int,
                 unimix: float):
        super().__init__()
        deter, units, layers, mult = MODEL_SIZES[size]
        self.encoder = Encoder(obs_space, units, layers, mult)
        self.rssm = RSSM(action_size, self.encoder.out_size, deter, units, num_latents, num_classes, unimix)
        feat = self.rssm.feat_size
        self.decoder = Decoder(obs_space, feat, units, layers, mult)
        self.reward = mlp(feat, units, layers, NUM_BINS, zero_last=True)
        self.cont = mlp(feat, units, layers, 1)

    def observe(self, obs: torch.Tensor, actions: torch.Tensor, generator=None) -> Dict[str, torch.Tensor]:
        """Filters `[B, T, ...]` observations with the `[B, T, A]` actions taken BEFORE each of
        them (zeros at t = 0), from the zero state.

        Returns `h [B, T, deter]`, `z [B, T, S*C]`, `post` and `prior` logits `[B, T, S, C]`.
        """
        b, t = obs.shape[:2]
        embed = self.encoder(obs.reshape(b * t, *obs.shape[2:])).reshape(b, t, -1)
        h = obs.new_zeros(b, self.rssm.deter, dtype=torch.float32)
        z = obs.new_zeros(b, self.rssm.num_latents * self.rssm.num_classes, dtype=torch.float32)
        hs, zs, posts, priors = [], [], [], []
        for i in range(t):
            h, prior = self.rssm.img_step(h, z, actions[:, i])
            post = self.rssm.obs_step(h, embed[:, i])
            z = self.rssm.sample(post, generator)
            hs.append(h)
            zs.append(z)
            posts.append(post)
            priors.append(prior)
        return {"h": torch.stack(hs, 1), "z": torch.stack(zs, 1), "post": torch.stack(posts, 1),
                "prior": torch.stack(priors, 1)}


__all__ = ["Decoder", "Encoder", "MODEL_SIZES", "RSSM", "WorldModel", "check_observation_space",
           "is_image_space", "mlp"]
