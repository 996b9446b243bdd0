"""Target networks: the slowly moving copies off-policy learners bootstrap from."""
from __future__ import annotations

import torch


def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, parameters and buffers alike (tau 1: copy)."""
    with torch.no_grad():
        targets, sources = list(target.parameters()), list(source.parameters())
        if tau >= 1.0:
            torch._foreach_copy_(targets, sources)
        elif targets:  # one `_foreach` call per op: the same element-wise maths as t.mul_(1 - tau).add_(s, alpha=tau)
            torch._foreach_mul_(targets, 1.0 - tau)
            torch._foreach_add_(targets, sources, alpha=tau)
        for t, s in zip(target.buffers(), source.buffers()):
            t.copy_(s)
