"""The policy ES and ARS keep on the trainer: a TorchPolicy that only acts (for
`compute_single_action`, evaluation, export and checkpoints); its acting layers hold the
current `theta`, which the trainer writes after each update. It never computes a loss."""
from __future__ import annotations

from rlfleet.policy.fast_plan import NUMPY, TORCH, FastPathPlan
from rlfleet.policy.torch_policy import TorchPolicy

_NUMPY_UPDATE = "the trainer updates the flat parameters in NumPy (no gradient, no torch learner)"


class EvolutionPolicy(TorchPolicy):
    """Acts with the catalog model; learning happens in the trainer (ES / ARS updates)."""

    @property
    def fast_plan(self) -> FastPathPlan:
        if self._fast_plan is None:
            actor_why = self.numpy_actor_reason()
            self._fast_plan = FastPathPlan(
                actor=NUMPY if actor_why is None else TORCH,
                actor_reason=actor_why or "a fully connected model with Categorical / DiagGaussian actions",
                learner=NUMPY, learner_reason=_NUMPY_UPDATE)
        return self._fast_plan


__all__ = ["EvolutionPolicy"]
