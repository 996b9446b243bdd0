"""The NaN guard of learning: a gradient update whose loss or gradient is not finite is skipped.

`TorchPolicy._step` computes every loss, backpropagates and takes each optimizer's gradient
norm (the one `grad_clip` computes anyway, else `torch._foreach_norm`); `NonFiniteGuard.ok`
then looks at all of them with one `torch.isfinite` and one sync. When one is NaN or
infinite, no optimizer steps (weights and optimizer moments stay as they were), the skip
is counted (`num_nonfinite_updates`, reported per policy as
`info/learner/<policy_id>/num_nonfinite_updates`), and more than `max_nonfinite_updates`
skips in a row raise `NonFiniteUpdateError` naming the policy, the optimizer whose loss or
gradient went bad, and the loss stats that were not finite.
"""
from __future__ import annotations

import logging
from typing import Dict, Iterable, List

import torch

logger = logging.getLogger(__name__)


class NonFiniteUpdateError(FloatingPointError):
    """More than `max_nonfinite_updates` gradient updates in a row had a NaN/inf loss or gradient."""


def grad_norm(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """A number that is finite exactly when every gradient of `params` is (the sum of the
    per-tensor norms: one `_foreach_norm` call, no clipping)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    return torch.stack(torch._foreach_norm(grads)).sum()


class NonFiniteGuard:
    """Decides, per update, whether the optimizers may step, and counts the skipped updates.

    Args:
        policy_id: named in the error.
        max_consecutive: `max_nonfinite_updates`: skips in a row allowed (0: the first raises).

    Attributes:
        total: updates skipped so far (`num_nonfinite_updates`).
        streak: updates skipped in a row, up to the last one.
    """

    def __init__(self, policy_id: str, max_consecutive: int):
        self.policy_id = policy_id
        self.max_consecutive = int(max_consecutive)
        self.total = 0
        self.streak = 0

    def ok(self, losses: Dict[str, torch.Tensor], norms: Dict[str, torch.Tensor],
           stats: Dict[str, object]) -> bool:
        """Whether every loss and gradient norm is finite (then the optimizers step).

        Args:
            losses: `{optimizer name: loss}` of the optimizers about to step.
            norms: `{optimizer name: gradient norm}` (see `grad_norm`).
            stats: the loss's stats, searched for non-finite entries when the update is skipped.

        Raises:
            NonFiniteUpdateError: more than `max_consecutive` updates in a row were skipped.
        """
        names = list(losses)
        values = torch.stack([t.detach().reshape(()).float() for name in names for t in (losses[name], norms[name])])
        if bool(torch.isfinite(values).all()):
            self.streak = 0
            return True
        self.total += 1
        self.streak += 1
        what = self._describe(losses, norms, stats)
        if self.streak > self.max_consecutive:
            raise NonFiniteUpdateError(
                f"Policy {self.policy_id!r}: {self.streak} gradient updates in a row had a non-finite loss or "
                f"gradient (more than 'max_nonfinite_updates': {self.max_consecutive}); the last one: {what}. Each "
                "was skipped: the weights are the last finite ones. Look for NaN/inf in the rewards and "
                "observations (the env checks catch them unless 'disable_env_checking' is True), or lower the "
                "learning rate / set 'grad_clip'; raise 'max_nonfinite_updates' to tolerate more.")
        if self.streak == 1:
            logger.warning("Policy %r: skipped a gradient update with a non-finite loss or gradient (%s); "
                           "the weights are unchanged", self.policy_id, what)
        return False

    @staticmethod
    def _describe(losses: Dict[str, torch.Tensor], norms: Dict[str, torch.Tensor],
                  stats: Dict[str, object]) -> str:
        parts: List[str] = []
        for name, loss in losses.items():
            value = float(loss.detach().reshape(()))
            if not torch.isfinite(torch.tensor(value)):
                parts.append(f"optimizer {name!r}'s loss is {value}")
            elif not bool(torch.isfinite(norms[name])):
                parts.append(f"optimizer {name!r}'s gradient is not finite (its loss is {value:.6g})")
        bad_stats = []
        for key, value in stats.items():
            if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
                bad_stats.append(key if value.numel() > 1 else f"{key}={float(value)}")
        if bad_stats:
            parts.append(f"non-finite loss stats: {', '.join(bad_stats)}")
        return "; ".join(parts)


__all__ = ["NonFiniteGuard", "NonFiniteUpdateError", "grad_norm"]
