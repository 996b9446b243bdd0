"""ONE linear-stack MLP in NumPy: the layers of a torch `Linear` (+ tanh / ReLU) stack as
arrays, a forward pass keeping every activation and its backward pass (the learners), and a
snapshot with the small-batch forward the sampler acts with.

One set of type rules for both: a stack is a `Linear`, an `Identity` or a `Sequential` of
exactly-`Linear` layers each followed by at most one tanh / ReLU (`Identity` members are
skipped); anything else is not a stack (None), and its owner keeps the torch path.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from torch import nn

ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu"}

# `[(linear, activation name or None)]`: what a model's `linear_stacks()` hands over.
LinearStack = List[Tuple[nn.Linear, Optional[str]]]
# `(W [out, in], b [out], activation name or None)` as NumPy arrays.
Layer = Tuple[np.ndarray, np.ndarray, Optional[str]]


def linear_stack(module: nn.Module) -> Optional[LinearStack]:
    """`module`'s layers as a `LinearStack`; None when it is not one (see the module doc)."""
    if isinstance(module, nn.Identity):
        return []
    mods = [module] if isinstance(module, nn.Linear) else list(module) if isinstance(module, nn.Sequential) else None
    if mods is None:
        return None
    layers: List[List] = []
    for m in mods:
        if type(m) is nn.Linear:
            layers.append([m, None])
        elif type(m) in ACTIVATIONS and layers and layers[-1][1] is None:
            layers[-1][1] = ACTIVATIONS[type(m)]
        elif type(m) is not nn.Identity:
            return None
    return [(lin, act) for lin, act in layers]


def numpy_layers(stack: LinearStack, grad_views: Optional[dict] = None
                 ) -> Tuple[List[Layer], Optional[List[Tuple[np.ndarray, np.ndarray]]]]:
    """`(layers, grads)`: `stack`'s parameters as NumPy views (writes train the torch
    tensors), and each layer's `(dW, db)` views from `grad_views` (`{id(param): view}`;
    None: no gradients, e.g. for frozen or target nets)."""
    layers = [(lin.weight.detach().numpy(), lin.bias.detach().numpy(), act) for lin, act in stack]
    grads = None if grad_views is None else [(grad_views[id(lin.weight)], grad_views[id(lin.bias)])
                                             for lin, _ in stack]
    return layers, grads


def _activate(x: np.ndarray, act: Optional[str]) -> np.ndarray:
    if act == "tanh":
        np.tanh(x, out=x)
    elif act == "relu":
        np.maximum(x, 0.0, out=x)
    return x


def forward(layers: Sequence[Layer], x: np.ndarray) -> List[np.ndarray]:
    """The input and every layer's output (after its activation)."""
    outs = [x]
    for w, b, act in layers:
        x = x @ w.T
        x += b
        outs.append(_activate(x, act))
    return outs


def backward(layers: Sequence[Layer], grads, outs: List[np.ndarray], d: np.ndarray,
             need_input_grad: bool) -> Optional[np.ndarray]:
    """Backpropagates `d` (the gradient of the last output of `forward(layers, ...)`, whose
    `outs` these are) through `layers`; writes each weight and bias gradient into `grads`'
    views (None: only the input's gradient is wanted); returns the input's gradient."""
    for i in range(len(layers) - 1, -1, -1):
        w, _, act = layers[i]
        out = outs[i + 1]
        if act == "tanh":  # torch's tanh_backward: d * (1 - y^2)
            d = d * (1.0 - out * out)
        elif act == "relu":  # threshold_backward on the output
            d = d * (out > 0)
        if grads is not None:
            gw, gb = grads[i]
            np.matmul(d.T, outs[i], out=gw)
            np.sum(d, axis=0, out=gb)
        if i == 0 and not need_input_grad:
            return None
        d = d @ w
    return d


# Up to this many rows, the layers run transposed (W @ x^T): OpenBLAS's kernels are faster
# for a few columns than for a few rows (8 rows x 256 x 256 here: 15 us against 21 us);
# beyond it the row-major product is as fast or faster.
_TRANSPOSED_ROWS = 16


class SnapshotMLP:
    """A copy of a stack's weights (later training does not move it) with a forward pass for
    acting: both layouts of each layer, and per small batch size the bias repeated in
    columns (adding a contiguous [out, n] bias is 4x faster than broadcasting a column)."""

    def __init__(self, stack: LinearStack):
        self.layers: List[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Optional[str],
                                Dict[int, np.ndarray]]] = []
        for lin, act in stack:
            w = lin.weight.detach().numpy().copy()
            b = lin.bias.detach().numpy().copy()
            self.layers.append((np.ascontiguousarray(w.T), b, w, b.reshape(-1, 1), act, {}))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        # The sampler's per-step hot path: activations inline (a call per layer cost ~5 % of a
        # one-env step), and small batches multiply in the transposed layout.
        n = len(x)
        if n <= _TRANSPOSED_ROWS and self.layers:
            x = x.T
            for _, _, w, b_col, act, wide in self.layers:
                x = w @ x
                bias = wide.get(n)
                if bias is None:
                    bias = wide[n] = np.ascontiguousarray(np.broadcast_to(b_col, (len(b_col), n)))
                x += bias
                if act == "tanh":
                    np.tanh(x, out=x)
                elif act == "relu":
                    np.maximum(x, 0.0, out=x)
            return x.T
        for w_t, b, _, _, act, _ in self.layers:
            x = x @ w_t
            x += b
            if act == "tanh":
                np.tanh(x, out=x)
            elif act == "relu":
                np.maximum(x, 0.0, out=x)
        return x


__all__ = ["ACTIVATIONS", "Layer", "LinearStack", "SnapshotMLP", "backward", "forward", "linear_stack",
           "numpy_layers"]
