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
