"""Target networks: the slowly moving copies off-policy learners bootstrap from."""
from __future__ import annotations

import torch


def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, parameters and buffers alike (tau 1: copy)."""
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters()):
            if tau >= 1.0:
                t.copy_(s)
            else:
                t.mul_(1.0 - tau).add_(s, alpha=tau)
        for t, s in zip(target.buffers(), source.buffers()):
            t.copy_(s)
