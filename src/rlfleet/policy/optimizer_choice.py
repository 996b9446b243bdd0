"""Which Adam a policy builds from the `optimizer` config key, and that key's checks.

The lean `rlfleet.policy.optim.Adam` serves every configuration it covers (it avoids
`torch.optim`'s start-up cost, see there); `torch.optim.Adam` is built for the options only it
implements. The `optimizer` entries are checked when the policy is built, before any
optimizer exists, so a bad entry fails at trainer construction with the key named.
"""
from __future__ import annotations

from typing import Any, Dict, List

import torch

from rlfleet.policy.optim import ADAM_DEFAULTS, TORCH_ONLY_OPTIONS, Adam, check_adam_hyperparameters


def adam_arguments() -> List[str]:
    """The keyword arguments Adam takes besides `params` and `lr` (the `optimizer` config key's entries)."""
    return sorted(set(ADAM_DEFAULTS) - {"lr"})


def check_adam_options(user_options: Dict[str, Any]) -> None:
    """Checks the `optimizer` config key's entries without building an optimizer.

    Raises:
        ValueError: naming the `optimizer` key for an entry Adam does not take (or `lr`, which
            has its own keys), or a value Adam rejects.
    """
    allowed = adam_arguments()
    unknown = sorted(set(user_options) - set(allowed))
    if unknown:
        hint = " (set learning rates with `lr` or the algorithm's learning-rate keys)" if "lr" in unknown else ""
        raise ValueError(f"'optimizer': {user_options!r} has entries {unknown} that torch.optim.Adam does not take"
                         f"{hint}; use only {allowed}")
    try:
        check_adam_hyperparameters(user_options)
    except (TypeError, ValueError, IndexError) as err:
        raise ValueError(f"'optimizer': {user_options!r} is not valid for torch.optim.Adam: {err}") from err


def build_adam(params, lr: float, algorithm_defaults: Dict[str, Any], user_options: Dict[str, Any]):
    """Adam over `params` at `lr` with the algorithm's defaults, which the user's options (the
    `optimizer` config key, checked first) override: the lean `Adam` here, or
    `torch.optim.Adam` for the options only it implements (capturable, differentiable,
    fused, a tensor lr or betas, complex parameters).

    Raises:
        ValueError: naming the `optimizer` key for an entry Adam does not take, or a value
            Adam rejects.
    """
    check_adam_options(user_options)
    options = {**algorithm_defaults, **user_options}
    params = list(params)
    torch_only = (any(options.get(k) for k in TORCH_ONLY_OPTIONS) or torch.is_tensor(lr)
                  or any(torch.is_tensor(b) for b in options.get("betas", ()))
                  or any(torch.is_tensor(p) and p.is_complex() for p in params))
    try:
        if torch_only:
            return torch.optim.Adam(params, lr=lr, **options)
        return Adam(params, lr=lr, **options)
    except (TypeError, ValueError) as err:
        raise ValueError(f"'optimizer': {user_options!r} is not valid for torch.optim.Adam: {err}") from err


__all__ = ["adam_arguments", "build_adam", "check_adam_options"]
