"""A torch optimizer's state as NumPy arrays and JSON-able values (what checkpoints hold), and
back: for the policies' optimizers and an exploration's own (Curiosity's)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np
import torch


def optimizer_state(optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    """`optimizer.state_dict()` with tensors as NumPy arrays and param indices as str keys."""
    sd = optimizer.state_dict()
    return {
        "state": {str(i): {k: v.detach().cpu().numpy().copy() if torch.is_tensor(v) else v for k, v in s.items()}
                  for i, s in sd["state"].items()},
        "param_groups": [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()}
                         for g in sd["param_groups"]],
    }


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: Dict[str, Any]) -> None:
    """Inverse of `optimizer_state` (lists of hyperparameters such as `betas` become tuples again)."""
    state = {int(i): {k: torch.tensor(np.asarray(v)) if isinstance(v, np.ndarray) else v for k, v in s.items()}
             for i, s in saved["state"].items()}
    groups = [{k: tuple(v) if isinstance(v, list) and k != "params" else v for k, v in g.items()}
              for g in saved["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


__all__ = ["load_optimizer_state", "optimizer_state"]
