"""Where a policy acts and learns: the NumPy fast paths (`rlfleet.fast`) or torch."""
from __future__ import annotations

from typing import Optional


def supports_fast_path(policy) -> bool:
    """Whether `policy`'s acting can run on a NumPy snapshot of its model: a plain
    FullyConnectedNetwork without pixel scaling, a Categorical or DiagGaussian distribution and
    StochasticSampling exploration (anything else acts with torch)."""
    return actor_reason(policy) is None


def actor_reason(policy) -> Optional[str]:
    """Why `policy` cannot act through the NumPy snapshot (None: it can)."""
    from rlfleet.exploration.stochastic_sampling import StochasticSampling
    from rlfleet.models.distributions import Categorical, DiagGaussian
    from rlfleet.models.fcnet import FullyConnectedNetwork

    if type(policy.model) is not FullyConnectedNetwork:
        return f"the model is {type(policy.model).__name__}, not a FullyConnectedNetwork"
    # uint8 inputs: the torch path scales them (`pixels`; `scale` in older models)
    if getattr(policy.model, "pixels", None) is not None or getattr(policy.model, "scale", None) is not None:
        return "the model scales pixel inputs"
    if policy.dist_class not in (Categorical, DiagGaussian):
        return f"the action distribution is {getattr(policy.dist_class, '__name__', policy.dist_class)}"
    if type(policy.exploration) is not StochasticSampling:
        return f"the exploration is {type(policy.exploration).__name__}, not StochasticSampling"
    return None
