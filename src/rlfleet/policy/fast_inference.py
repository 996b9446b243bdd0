"""NumPy inference for fully connected policies: the sampler's hot path.

For the small batches a rollout worker acts on (one row per sub-env), a torch forward
pass costs far more in per-op dispatch than in arithmetic. A NumPy copy of the same
weights computes identical-in-distribution actions several times faster. The copy is
rebuilt lazily whenever the policy's weights change (`version`).

Only used when exact: a `FullyConnectedNetwork` with a Categorical or DiagGaussian
action distribution and StochasticSampling exploration; anything else uses torch.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from typing import Any, Callable, Iterator, List, Optional, Tuple

import numpy as np
from torch import nn

from rlfleet.models.distributions import Categorical, DiagGaussian
from rlfleet.models.fcnet import FullyConnectedNetwork

_ACTS = {nn.Tanh: lambda x: np.tanh(x, out=x), nn.ReLU: lambda x: np.maximum(x, 0.0, out=x)}


def _layers(module: nn.Module) -> Optional[List[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, object, dict]]]:
    """(W^T, b, W, b as a column, activation, {n: b repeated in n columns}) per Linear of an
    MLP made of Linear + supported activations: both layouts, for `_run`."""
    mods = [module] if isinstance(module, (nn.Linear, nn.Identity)) else list(module)
    layers: List[List[Any]] = []
    for m in mods:
        if isinstance(m, nn.Linear):
            w = m.weight.detach().numpy().copy()
            b = m.bias.detach().numpy().copy()
            layers.append([np.ascontiguousarray(w.T), b, w, b.reshape(-1, 1), None, {}])
        elif type(m) in _ACTS and layers:
            layers[-1][4] = _ACTS[type(m)]
        elif not isinstance(m, nn.Identity):
            return None
    return [tuple(layer) for layer in layers]


# Up to this many rows, the layers run transposed (W @ x^T): OpenBLAS's kernels are faster
# for a few columns than for a few rows (8 rows x 256 x 256 here: 15 us against 21 us);
# beyond it the row-major product is as fast or faster.
_TRANSPOSED_ROWS = 16


def _run(layers, x: np.ndarray) -> np.ndarray:
    n = len(x)
    if n <= _TRANSPOSED_ROWS and layers:
        x = x.T
        for _, _, w, b_col, act, wide in layers:
            x = w @ x
            # Adding a contiguous [out, n] bias: 4x faster than broadcasting the column.
            bias = wide.get(n)
            if bias is None:
                bias = wide[n] = np.ascontiguousarray(np.broadcast_to(b_col, (len(b_col), n)))
            x += bias
            if act is not None:
                x = act(x)
        return x.T
    for w_t, b, _, _, act, _ in layers:
        x = x @ w_t
        x += b
        if act is not None:
            x = act(x)
    return x


class NumpyMLPInference:
    """A NumPy snapshot of a FullyConnectedNetwork's forward and value passes."""

    def __init__(self, model: FullyConnectedNetwork):
        self.trunk = _layers(model.trunk)
        self.logits = _layers(model.logits)
        self.value_trunk = None if model.value_trunk is None else _layers(model.value_trunk)
        self.value_head = _layers(model.value_head)
        self.log_std = None if not model.free_log_std else model.log_std.detach().numpy().copy()
        self.ok = None not in (self.trunk, self.logits, self.value_head) and (
            model.value_trunk is None or self.value_trunk is not None)
        # The width of the distribution inputs (logits, or means then log-stds).
        self.num_outputs = int(model.num_outputs)

    def __call__(self, obs: np.ndarray, values: bool = True) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """Returns `(dist_inputs [B, K], values [B])` (values None when not asked for)."""
        obs = obs.reshape(len(obs), -1)
        features = _run(self.trunk, obs)
        out = _run(self.logits, features)
        if self.log_std is not None:
            out = np.concatenate([out, np.broadcast_to(self.log_std, out.shape)], axis=1)
        if not values:
            return out, None
        value_in = features if self.value_trunk is None else _run(self.value_trunk, obs)
        return out, _run(self.value_head, value_in)[:, 0]

    def values(self, obs: np.ndarray) -> np.ndarray:
        """The value predictions alone `[B]` (float32), skipping the logits."""
        flat = obs.reshape(len(obs), -1)
        value_in = _run(self.trunk, flat) if self.value_trunk is None else _run(self.value_trunk, flat)
        return _run(self.value_head, value_in)[:, 0].astype(np.float32, copy=False)


def supports_fast_path(policy) -> bool:
    from rlfleet.exploration.stochastic_sampling import StochasticSampling

    return (
        type(policy.model) is FullyConnectedNetwork
        # uint8 inputs: the torch path scales them (`pixels`; `scale` in older models)
        and getattr(policy.model, "pixels", None) is None and getattr(policy.model, "scale", None) is None
        and policy.dist_class in (Categorical, DiagGaussian)
        and type(policy.exploration) is StochasticSampling
    )


def sample_numpy(dist_class, inputs: np.ndarray, explore: bool, rng: np.random.Generator
                 ) -> Tuple[np.ndarray, np.ndarray]:
    """`(actions, logp)` drawn from the distribution over `inputs`, in NumPy."""
    if dist_class is Categorical:
        shifted = inputs - inputs.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        if not explore:
            actions = inputs.argmax(axis=1)
            return actions, np.zeros(len(actions), np.float32)
        # Gumbel-max: argmax(logits + Gumbel noise) is a draw from the softmax.
        gumbel = -np.log(-np.log(rng.random(inputs.shape, dtype=np.float32) + 1e-20) + 1e-20)
        actions = (log_probs + gumbel).argmax(axis=1)
        return actions, log_probs[np.arange(len(actions)), actions].astype(np.float32)
    mean, log_std = np.split(inputs, 2, axis=1)
    if not explore:
        return mean, np.zeros(len(mean), np.float32)
    noise = rng.standard_normal(mean.shape, dtype=np.float32)
    actions = mean + np.exp(log_std) * noise
    logp = -0.5 * (noise * noise).sum(1) - log_std.sum(1) - 0.5 * np.log(2 * np.pi) * mean.shape[1]
    return actions, logp.astype(np.float32)


def categorical_logp(inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log softmax(inputs)[action] per row, float32."""
    top = inputs.max(axis=1, keepdims=True)
    lse = np.log(np.exp(inputs - top).sum(axis=1)) + top[:, 0]
    return (np.take_along_axis(inputs, actions.reshape(-1, 1).astype(np.intp), 1)[:, 0] - lse).astype(np.float32)


def gaussian_logp(inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log N(actions; mean, exp(log_std)) per row, float32 (`inputs` = [mean, log_std])."""
    mean, log_std = np.split(inputs, 2, axis=1)
    z = (actions.reshape(mean.shape) - mean) * np.exp(-log_std)
    return (-0.5 * (z * z).sum(1) - log_std.sum(1) - 0.5 * np.log(2 * np.pi) * mean.shape[1]).astype(np.float32)


class ChunkActor:
    """Acts for one sampler chunk (up to `steps` steps of `num_envs` envs) with a NumPy
    snapshot of the policy, doing per step only what the next action needs.

    The exploration noise of the whole chunk is drawn in one call up front (the same
    distributions as `sample_numpy`: Gumbel-max for Categorical, Gaussian noise for
    DiagGaussian); the log-likelihoods of the actions taken and the value predictions are
    computed once per chunk, vectorised over its rows, by `finish`. The weights cannot change
    within a chunk (the sampler holds its policy), so the values are those acting would
    have recorded step by step.

    Args:
        net: the NumPy snapshot of the policy's model.
        dist_class: Categorical or DiagGaussian.
        rng: the policy's NumPy generator.
        explore: sample (True) or act greedily (False).
        steps: the most steps this chunk takes.
        num_envs: rows per step.
    """

    def __init__(self, net: NumpyMLPInference, dist_class, rng: np.random.Generator, explore: bool, steps: int,
                 num_envs: int):
        self.net = net
        self.categorical = dist_class is Categorical
        self.explore = explore
        self._t = 0
        self._noise: Optional[np.ndarray] = None
        num_outputs = net.num_outputs
        if explore and self.categorical:
            u = rng.random((steps, num_envs, num_outputs), dtype=np.float32)
            # Gumbel noise: argmax(logits + g) is a draw from softmax(logits).
            self._noise = -np.log(-np.log(u + 1e-20) + 1e-20)
        elif explore:
            self._noise = rng.standard_normal((steps, num_envs, num_outputs // 2), dtype=np.float32)

    def act(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """`(actions, dist_inputs)` for one step's observations `[num_envs, ...]`."""
        dist_inputs, _ = self.net(obs, values=False)
        noise = self._noise
        t = self._t
        self._t = t + 1
        if self.categorical:
            return (dist_inputs + noise[t] if noise is not None else dist_inputs).argmax(axis=1), dist_inputs
        k = dist_inputs.shape[1] // 2
        mean = dist_inputs[:, :k]
        if noise is None:
            return mean.copy(), dist_inputs
        return mean + np.exp(dist_inputs[:, k:]) * noise[t], dist_inputs

    def logp(self, dist_inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The log-likelihoods of `actions` (rows of a finished chunk); 0 when greedy, as
        `sample_numpy` records them."""
        if not self.explore:
            return np.zeros(len(actions), np.float32)
        if self.categorical:
            return categorical_logp(dist_inputs, actions)
        return gaussian_logp(dist_inputs, actions)

    def values(self, obs: np.ndarray) -> np.ndarray:
        """The value predictions for a finished chunk's observations, in one pass."""
        return self.net.values(obs)


def _blas_thread_setter() -> Optional[Callable[[int], int]]:
    """OpenBLAS's `openblas_set_num_threads_local` (0.3.27+) from the library NumPy loaded:
    sets the calling thread's BLAS thread count, returns the previous one. None elsewhere
    (another BLAS, or a NumPy without bundled OpenBLAS): then nothing changes."""
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "*openblas*"))):
        try:
            setter = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        setter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
        return setter
    return None


_BLAS_SETTER: Any = False  # not looked up yet


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """NumPy's matrix products on the calling thread alone while inside (restored after).

    The sampler's products are small (a few rows by a few hundred): splitting them over
    threads costs more than it saves, and on a loaded machine each waits for a core (a
    200 x 256 x 256 product measured 20x slower with 2 threads than with 1 under load;
    one row 2x). Thread-local: a learner thread beside it keeps its threads.
    """
    global _BLAS_SETTER
    if _BLAS_SETTER is False:
        _BLAS_SETTER = _blas_thread_setter()
    if _BLAS_SETTER is None:
        yield
        return
    previous = _BLAS_SETTER(1)
    try:
        yield
    finally:
        _BLAS_SETTER(previous)


__all__ = ["NumpyMLPInference", "ChunkActor", "single_threaded_blas", "supports_fast_path", "sample_numpy", "categorical_logp",
           "gaussian_logp"]
