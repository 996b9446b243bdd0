"""DreamerV3's numerical pieces (Hafner et al. 2023, arXiv:2301.04104, section 2 and appendix):
symlog / symexp, the two-hot encoding over exponentially spaced bins, the KL balancing with
free bits, lambda-returns and the percentile return normaliser.

Every function here is plain torch on tensors, testable alone against NumPy.
"""
from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

# The paper's two-hot bins: 255 equally spaced in symlog space over [-20, 20] (symexp of which
# covers returns of +-4.8e8).
NUM_BINS = 255
BIN_RANGE = 20.0


def symlog(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * ln(|x| + 1): compresses large magnitudes, the identity near 0 (paper eq. 1)."""
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x: torch.Tensor) -> torch.Tensor:
    """The inverse of `symlog`: sign(x) * (exp(|x|) - 1)."""
    return torch.sign(x) * torch.expm1(x.abs())


def bins(device=None) -> torch.Tensor:
    """The `NUM_BINS` bin centres in symlog space."""
    return torch.linspace(-BIN_RANGE, BIN_RANGE, NUM_BINS, device=device)


def two_hot(y: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """`[..., K]` weights on the two bins around each `y` (symlog space), summing to 1 and
    placing their mean exactly at `y` (clipped to the outer bins)."""
    y = y.clamp(float(centres[0]), float(centres[-1]))
    hi = torch.searchsorted(centres, y.contiguous(), right=True).clamp(1, len(centres) - 1)
    lo = hi - 1
    w_hi = (y - centres[lo]) / (centres[hi] - centres[lo])
    out = torch.zeros(*y.shape, len(centres), device=y.device, dtype=y.dtype)
    out.scatter_(-1, lo.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
    out.scatter_add_(-1, hi.unsqueeze(-1), w_hi.unsqueeze(-1))
    return out


def two_hot_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the bin logits with the two-hot of symlog(target) (the reward and
    critic losses, paper eq. 9-10)."""
    centres = bins(logits.device)
    return -(two_hot(symlog(target), centres) * F.log_softmax(logits, -1)).sum(-1)


def two_hot_mean(logits: torch.Tensor) -> torch.Tensor:
    """The prediction of a two-hot head: symexp of the softmax-weighted bin centres."""
    return symexp((F.softmax(logits, -1) * bins(logits.device)).sum(-1))


def unimix_logits(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    """Log-probabilities of the categorical mixed with `unimix` of the uniform one (the paper's
    1%: keeps KL and log-probabilities finite)."""
    probs = F.softmax(logits, -1)
    if unimix > 0:
        probs = (1.0 - unimix) * probs + unimix / logits.shape[-1]
    return torch.log(probs)


def categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) of `[..., S, C]` categoricals (normalised log-probabilities), summed over
    the S latents."""
    return (p_logits.exp() * (p_logits - q_logits)).sum((-2, -1))


def kl_losses(post_logits: torch.Tensor, prior_logits: torch.Tensor, free_nats: float
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(dyn_loss, rep_loss, kl)` per step (paper eq. 5): the dynamics loss trains the prior
    towards the stopped posterior, the representation loss the posterior towards the stopped
    prior, each clipped below at `free_nats` (free bits)."""
    dyn = categorical_kl(post_logits.detach(), prior_logits)
    rep = categorical_kl(post_logits, prior_logits.detach())
    return dyn.clamp(min=free_nats), rep.clamp(min=free_nats), dyn.detach()


def lambda_returns(rewards: torch.Tensor, values: torch.Tensor, continues: torch.Tensor, gamma: float,
                   lam: float) -> torch.Tensor:
    """`[H, N]` bootstrapped lambda-returns of an imagined rollout (paper eq. 7).

    Args:
        rewards: `[H, N]` reward predicted on arriving at imagined step t + 1.
        values: `[H + 1, N]` the critic's values of imagined steps 0..H.
        continues: `[H, N]` the continue probability of step t + 1.
    """
    out = []
    last = values[-1]
    for t in reversed(range(rewards.shape[0])):
        last = rewards[t] + gamma * continues[t] * ((1.0 - lam) * values[t + 1] + lam * last)
        out.append(last)
    return torch.stack(out[::-1])


class ReturnNormalizer(nn.Module):
    """The scale S of the actor's advantages: an EMA (`decay`) of the 95th minus the 5th
    percentile of the lambda-returns, never below 1 so that small returns are not blown up
    (paper eq. 11). A buffer, so it travels with the weights and checkpoints."""

    def __init__(self, decay: float = 0.99, low: float = 0.05, high: float = 0.95):
        super().__init__()
        self.decay, self.low, self.high = decay, low, high
        self.register_buffer("scale", torch.zeros(()))
        self.register_buffer("initialised", torch.zeros(()))

    @torch.no_grad()
    def update(self, returns: torch.Tensor) -> torch.Tensor:
        """Folds one batch of returns into the EMA; returns the divisor max(1, S)."""
        flat = returns.detach().flatten().float()
        spread = torch.quantile(flat, self.high) - torch.quantile(flat, self.low)
        if float(self.initialised) == 0.0:
            self.scale.copy_(spread)
            self.initialised.fill_(1.0)
        else:
            self.scale.mul_(self.decay).add_((1.0 - self.decay) * spread)
        return self.scale.clamp(min=1.0)


__all__ = ["BIN_RANGE", "NUM_BINS", "ReturnNormalizer", "bins", "categorical_kl", "kl_losses", "lambda_returns",
           "symexp", "symlog", "two_hot", "two_hot_loss", "two_hot_mean", "unimix_logits"]
