"""`LearningState`: what a TorchPolicy learns with, apart from what it acts with
(acting_state.py), as Tianshou keeps collection apart from learning: the optimizers, built on
first use, their parameter lists, and optimizer state that arrived before they existed.

A worker that only acts (remote sampling, evaluation, `rlfleet evaluate`) never builds an
optimizer; `set_state` on it keeps the saved optimizer state until one is built.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch

from rlfleet.policy.optim import optimizer_params
from rlfleet.policy.policy_state import load_optimizer_state, optimizer_state, saved_optimizer_states


class LearningState:
    """A policy's optimizers and their parameter lists.

    Args:
        policy: the TorchPolicy (its `make_optimizers`, and `saved_optimizer_states` reads
            its optimizer names).
        on_build: called once the optimizers are built (the NumPy learner binds to them).
    """

    def __init__(self, policy: Any, on_build: Callable[[], None]):
        self._policy = policy
        self._on_build = on_build
        # `{name: optimizer}`, None until first used.
        self.built: Optional[Dict[str, Any]] = None
        # `{name: the parameters the optimizer updates}`, read once (not per update): the
        # learning loop's gradient norms, clipping and per-optimizer backprop use them.
        self.params: Dict[str, List[torch.Tensor]] = {}
        # Optimizer state `load` received before the optimizers were built.
        self.pending: Optional[Dict[str, Any]] = None

    @property
    def optimizers(self) -> Dict[str, Any]:
        """`{name: optimizer}` from `policy.make_optimizers()`, built on first use (then given
        any optimizer state `load` received before)."""
        if self.built is None:
            self.built = self._policy.make_optimizers()
            self._on_build()
            self.params = {name: optimizer_params(opt) for name, opt in self.built.items()}
            pending, self.pending = self.pending, None
            if pending is not None:
                self._apply(pending)
        return self.built

    def state(self) -> Dict[str, Any]:
        """`{name: optimizer state}` (NumPy arrays and JSON-able scalars); builds them."""
        return {name: optimizer_state(opt) for name, opt in self.optimizers.items()}

    def load(self, saved: Dict[str, Any]) -> None:
        """Restores optimizer state from a policy state's optimizer entries (`"optimizers"`,
        or the older `"optimizer"` / `"<name>_optimizer"`); kept for later when the
        optimizers are not built yet."""
        if self.built is None:
            self.pending = saved or None
        else:
            self._apply(saved)

    def _apply(self, saved: Dict[str, Any]) -> None:
        for name, entry in saved_optimizer_states(self._policy, saved).items():
            load_optimizer_state(self.built[name], entry)


__all__ = ["LearningState"]
