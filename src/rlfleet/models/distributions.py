"""Action distributions over a model's flat outputs (PyTorch).

Each class wraps the model's output tensor (`inputs`) and knows how many outputs it needs
for a space (`required_model_output_shape`). Sampling takes an explicit
`torch.Generator`, so every policy owns its randomness.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

_LOG_2PI = math.log(2.0 * math.pi)


class ActionDistribution:
    """Base class: a distribution parametrised by a model's output rows."""

    def __init__(self, inputs: torch.Tensor, model=None):
        self.inputs = inputs
        self.model = model

    def sample(self, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        raise NotImplementedError  # abstract

    def deterministic_sample(self) -> torch.Tensor:
        raise NotImplementedError  # abstract

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # abstract

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError  # abstract

    def kl(self, other: "ActionDistribution") -> torch.Tensor:
        raise NotImplementedError  # abstract

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        raise NotImplementedError  # abstract


class Categorical(ActionDistribution):
    """Categorical over logits `[B, n]`."""

    numpy_kind = "categorical"  # rlfleet.fast.distributions restates it in NumPy

    def __init__(self, inputs: torch.Tensor, model=None):
        super().__init__(inputs, model)
        self.log_probs = F.log_softmax(inputs, dim=-1)

    def sample(self, generator=None):
        # Gumbel-max: one uniform draw per logit, no normalisation pass needed.
        u = torch.rand(self.inputs.shape, generator=generator, dtype=self.inputs.dtype)
        return torch.argmax(self.inputs - torch.log(-torch.log(u.clamp_min(1e-20))), dim=-1)

    def deterministic_sample(self):
        return torch.argmax(self.inputs, dim=-1)

    def logp(self, actions):
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self):
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: "Categorical"):
        p = self.log_probs.exp()
        return (p * (self.log_probs - other.log_probs)).sum(-1)

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(action_space.n)


class MultiCategorical(ActionDistribution):
    """Independent categoricals, one per MultiDiscrete component."""

    def __init__(self, inputs: torch.Tensor, model=None, input_lens: Sequence[int] = ()):
        super().__init__(inputs, model)
        self.cats = [Categorical(x, model) for x in torch.split(inputs, list(input_lens), dim=-1)]

    def sample(self, generator=None):
        return torch.stack([c.sample(generator) for c in self.cats], dim=-1)

    def deterministic_sample(self):
        return torch.stack([c.deterministic_sample() for c in self.cats], dim=-1)

    def logp(self, actions):
        return sum(c.logp(actions[..., i]) for i, c in enumerate(self.cats))

    def entropy(self):
        return sum(c.entropy() for c in self.cats)

    def kl(self, other: "MultiCategorical"):
        return sum(a.kl(b) for a, b in zip(self.cats, other.cats))

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(np.sum(action_space.nvec))


class DiagGaussian(ActionDistribution):
    """Diagonal Gaussian; `inputs` holds the means then the log standard deviations."""

    numpy_kind = "gaussian"  # rlfleet.fast.distributions restates it in NumPy

    def __init__(self, inputs: torch.Tensor, model=None):
        super().__init__(inputs, model)
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = torch.exp(self.log_std)

    def sample(self, generator=None):
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype)
        return self.mean + self.std * noise

    def deterministic_sample(self):
        return self.mean

    def logp(self, actions):
        z = (actions - self.mean) / self.std
        return -0.5 * (z * z).sum(-1) - self.log_std.sum(-1) - 0.5 * _LOG_2PI * self.mean.shape[-1]

    def entropy(self):
        return (self.log_std + 0.5 * (_LOG_2PI + 1.0)).sum(-1)

    def kl(self, other: "DiagGaussian"):
        var_ratio = (self.std / other.std) ** 2
        mean_term = ((self.mean - other.mean) / other.std) ** 2
        return 0.5 * (var_ratio + mean_term - 1.0 - torch.log(var_ratio)).sum(-1)

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(np.prod(action_space.shape)) * 2


class Bernoulli(ActionDistribution):
    """Independent Bernoullis over logits `[B, n]` (MultiBinary actions, flattened)."""

    def __init__(self, inputs: torch.Tensor, model=None):
        super().__init__(inputs, model)
        self.probs = torch.sigmoid(inputs)

    def sample(self, generator=None):
        u = torch.rand(self.inputs.shape, generator=generator, dtype=self.inputs.dtype)
        return (u < self.probs).long()

    def deterministic_sample(self):
        return (self.inputs > 0).long()

    def logp(self, actions):
        a = actions.reshape(self.inputs.shape).to(self.inputs.dtype)
        # log sigmoid(x) for a=1, log sigmoid(-x) for a=0, without overflow.
        return -F.binary_cross_entropy_with_logits(self.inputs, a, reduction="none").sum(-1)

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.inputs, self.probs, reduction="none").sum(-1)

    def kl(self, other: "Bernoulli"):
        p, lp, lq = self.probs, F.logsigmoid(self.inputs), F.logsigmoid(other.inputs)
        l1p, l1q = F.logsigmoid(-self.inputs), F.logsigmoid(-other.inputs)
        return (p * (lp - lq) + (1.0 - p) * (l1p - l1q)).sum(-1)

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(np.prod(action_space.shape))


class SquashedGaussian(ActionDistribution):
    """A Gaussian squashed by tanh into `[low, high]` (default the normalised range [-1, 1]).

    `inputs` holds the means then the log standard deviations (clamped to [-20, 2] so that
    neither sampling nor the log-likelihood blows up). For bounded Box spaces when an
    algorithm asks for it (`ModelCatalog.get_action_dist(..., dist_type="squashed_gaussian")`).
    """

    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

    def __init__(self, inputs: torch.Tensor, model=None, low: float = -1.0, high: float = 1.0):
        super().__init__(inputs, model)
        mean, log_std = torch.chunk(inputs, 2, dim=-1)
        self.mean = mean
        self.log_std = torch.clamp(log_std, self.LOG_STD_MIN, self.LOG_STD_MAX)
        self.std = torch.exp(self.log_std)
        self.low = torch.as_tensor(low, dtype=inputs.dtype)
        self.high = torch.as_tensor(high, dtype=inputs.dtype)

    def _squash(self, u):
        return self.low + (torch.tanh(u) + 1.0) * 0.5 * (self.high - self.low)

    def _unsquash(self, a):
        y = (a - self.low) * 2.0 / (self.high - self.low) - 1.0
        return torch.atanh(torch.clamp(y, -1.0 + 1e-6, 1.0 - 1e-6))

    def sample(self, generator=None):
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype)
        return self._squash(self.mean + self.std * noise)

    def sample_logp(self, generator=None):
        """`(actions, logp)` of one reparameterised draw, without the atanh round trip."""
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype)
        u = self.mean + self.std * noise
        return self._squash(u), self._logp_u(u)

    def deterministic_sample(self):
        return self._squash(self.mean)

    def _logp_u(self, u):
        z = (u - self.mean) / self.std
        gauss = -0.5 * (z * z).sum(-1) - self.log_std.sum(-1) - 0.5 * _LOG_2PI * self.mean.shape[-1]
        # d a / d u = (1 - tanh(u)^2) * (high - low) / 2; log(1 - tanh^2) written stably.
        log_det = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u)) + torch.log((self.high - self.low) / 2.0)
        return gauss - log_det.sum(-1)

    def logp(self, actions):
        return self._logp_u(self._unsquash(actions))

    def entropy(self):
        raise ValueError("SquashedGaussian has no closed-form entropy; estimate it as -logp of samples")

    def kl(self, other):
        raise ValueError("SquashedGaussian has no closed-form KL divergence")

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(np.prod(action_space.shape)) * 2


class MultiActionDistribution(ActionDistribution):
    """A composite distribution for Dict / Tuple action spaces: one child per leaf space.

    Actions travel as one flat float32 vector per row: the children's actions, each
    flattened (a Discrete leaf takes one slot), concatenated in the space's order
    (`gymnasium.spaces.Dict` keeps its keys sorted). `rlfleet.utils.spaces.unflatten_actions`
    turns such rows back into the env's nested structure. `logp`, `entropy` and `kl` are the
    sums over the children (the children are independent given the model's outputs).

    Args:
        inputs: `[B, sum(input_lens)]` model outputs.
        model: the model (passed on to the children).
        child_dists: one distribution class (or factory) per leaf.
        input_lens: model outputs each child takes.
        action_sizes: flat action slots each child takes.
    """

    def __init__(self, inputs: torch.Tensor, model=None, *, child_dists: Sequence, input_lens: Sequence[int],
                 action_sizes: Sequence[int]):
        super().__init__(inputs, model)
        self.action_sizes = [int(s) for s in action_sizes]
        self.children = [cls(x, model) for cls, x in zip(child_dists, torch.split(inputs, list(input_lens), dim=-1))]

    @staticmethod
    def _flat(a: torch.Tensor) -> torch.Tensor:
        return a.reshape(a.shape[0], -1).to(torch.float32)

    def _parts(self, actions: torch.Tensor):
        for child, part in zip(self.children, torch.split(actions, self.action_sizes, dim=-1)):
            if isinstance(child, Categorical):
                part = part[..., 0].round().long()
            elif isinstance(child, (MultiCategorical, Bernoulli)):
                part = part.round().long()
            yield child, part

    def sample(self, generator=None):
        return torch.cat([self._flat(c.sample(generator)) for c in self.children], dim=-1)

    def deterministic_sample(self):
        return torch.cat([self._flat(c.deterministic_sample()) for c in self.children], dim=-1)

    def logp(self, actions):
        return sum(child.logp(part) for child, part in self._parts(actions))

    def entropy(self):
        return sum(c.entropy() for c in self.children)

    def kl(self, other: "MultiActionDistribution"):
        return sum(a.kl(b) for a, b in zip(self.children, other.children))
