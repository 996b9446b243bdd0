"""Adam's update on flat NumPy buffers: torch.optim.Adam's elementwise ops, in its order
(no weight decay, AMSGrad or `maximize`), so the moments and weights come out the same
(tests/policy/test_optim.py checks them bit for bit). The lean `rlfleet.policy.optim.Adam` and the
NumPy learners' `FlatAdam` both step with it."""
from __future__ import annotations

from typing import Optional

import numpy as np


def adam_delta(grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray, step: float, beta1: float,
               beta2: float, lr: float, eps: float, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Advances the moments `exp_avg` / `exp_avg_sq` in place by `grad` (for the `step`-th
    update, counted from 1) and returns the parameters' increment (in `out` when given)."""
    f32 = np.float32
    out = np.empty_like(grad) if out is None else out
    np.subtract(grad, exp_avg, out=out)  # lerp_(grad, 1 - beta1): exp_avg + w * (grad - exp_avg)
    out *= f32(1 - beta1)
    exp_avg += out
    exp_avg_sq *= f32(beta2)  # addcmul_(grad, grad, value=1 - beta2): + (w * grad) * grad
    np.multiply(grad, f32(1 - beta2), out=out)
    out *= grad
    exp_avg_sq += out
    denom = np.sqrt(exp_avg_sq)
    denom /= f32((1 - beta2 ** step) ** 0.5)
    denom += f32(eps)
    # `param.addcdiv_(exp_avg, denom, value=v)`: `v * exp_avg` first, then the quotient.
    np.multiply(exp_avg, f32(-lr / (1 - beta1 ** step)), out=out)
    out /= denom
    return out


__all__ = ["adam_delta"]
