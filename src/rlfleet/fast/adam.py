"""Adam's update on flat NumPy buffers: torch.optim.Adam's elementwise ops, in its order
(no weight decay, AMSGrad or `maximize`), so the moments and weights come out the same."""
from __future__ import annotations

import numpy as np


def adam_delta(grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray, step: float, beta1: float,
               beta2: float, lr: float, eps: float) -> np.ndarray:
    """Advances the moments `exp_avg` / `exp_avg_sq` in place by `grad` (for the `step`-th
    update, counted from 1) and returns the parameters' increment."""
    exp_avg += np.float32(1 - beta1) * (grad - exp_avg)  # lerp_(grad, 1 - beta1)
    exp_avg_sq *= np.float32(beta2)
    exp_avg_sq += np.float32(1 - beta2) * grad * grad
    denom = np.sqrt(exp_avg_sq)
    denom /= np.float32((1 - beta2 ** step) ** 0.5)
    denom += np.float32(eps)
    # `param.addcdiv_(exp_avg, denom, value=v)`: `v * exp_avg` first, then the quotient.
    delta = exp_avg * np.float32(-lr / (1 - beta1 ** step))
    delta /= denom
    return delta


__all__ = ["adam_delta"]
