"""NumPy acting for fully connected policies: the sampler's hot path.

For the small batches a rollout worker acts on (one row per sub-env), a torch forward
pass costs far more in per-op dispatch than in arithmetic. A NumPy copy of the same
weights computes identical-in-distribution actions several times faster. The policy
rebuilds the copy whenever its weights change.

Only exact for a model whose `linear_stacks()` are all stacks (`fast.mlp`) and a
distribution with a `numpy_kind`; `NumpyMLPInference.ok` says whether the copy could be made.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from rlfleet.fast.distributions import CATEGORICAL, categorical_logp, gaussian_logp, gumbel, numpy_kind
from rlfleet.fast.mlp import SnapshotMLP


class NumpyMLPInference:
    """A NumPy snapshot of a fully connected model's forward and value passes.

    `model.linear_stacks()` gives `{"trunk", "logits", "value_head"[, "value_trunk"]: a
    `LinearStack` or None}` (the value head reads the trunk's features without a value
    trunk); `model.log_std_parameter()` the free log-std (or None); `model.num_outputs`
    the width of the distribution inputs."""

    def __init__(self, model):
        stacks = model.linear_stacks()
        self.ok = all(stack is not None for stack in stacks.values())
        snap = {name: SnapshotMLP(stack) if stack is not None else None for name, stack in stacks.items()}
        self.trunk, self.logits, self.value_head = snap["trunk"], snap["logits"], snap["value_head"]
        self.value_trunk = snap.get("value_trunk")
        log_std = model.log_std_parameter()
        self.log_std = None if log_std is None else log_std.detach().numpy().copy()
        # The width of the distribution inputs (logits, or means then log-stds).
        self.num_outputs = int(model.num_outputs)

    def __call__(self, obs: np.ndarray, values: bool = True) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """Returns `(dist_inputs [B, K], values [B])` (values None when not asked for)."""
        obs = obs.reshape(len(obs), -1)
        features = self.trunk(obs)
        out = self.logits(features)
        if self.log_std is not None:
            out = np.concatenate([out, np.broadcast_to(self.log_std, out.shape)], axis=1)
        if not values:
            return out, None
        value_in = features if self.value_trunk is None else self.value_trunk(obs)
        return out, self.value_head(value_in)[:, 0]

    def values(self, obs: np.ndarray) -> np.ndarray:
        """The value predictions alone `[B]` (float32), skipping the logits."""
        flat = obs.reshape(len(obs), -1)
        value_in = self.trunk(flat) if self.value_trunk is None else self.value_trunk(flat)
        return self.value_head(value_in)[:, 0].astype(np.float32, copy=False)


class ChunkActor:
    """Acts for one sampler chunk (up to `steps` steps of `num_envs` envs) with a NumPy
    snapshot of the policy, doing per step only what the next action needs.

    The exploration noise of the whole chunk is drawn in one call up front (the same
    distributions as `sample_numpy`: Gumbel-max for Categorical, Gaussian noise for
    DiagGaussian); the log-likelihoods of the actions taken and the value predictions are
    computed once per chunk, vectorised over its rows, by `finish`. The weights cannot change
    within a chunk (the sampler holds its policy), so the values are those acting would
    have recorded step by step.

    `act` is the acting protocol's (policy/actor.py) itself: the sampler calls it per step,
    with no layer between (each Python call is ~2 % of a one-env step). It keeps each step's
    rows (`obs_rows`, `dist_rows`, `action_rows`) for the caller's `finish`.

    Args:
        net: the NumPy snapshot of the policy's model.
        dist_class: Categorical or DiagGaussian (a class with a `numpy_kind`).
        rng: the policy's NumPy generator.
        explore: sample (True) or act greedily (False).
        steps: the most steps this chunk takes.
        num_envs: rows per step.
        dist_inputs_key: the name `act` returns the distribution inputs under.
        exploration: an object whose `last_timestep` `act(timestep=...)` sets (or None).
    """

    def __init__(self, net: NumpyMLPInference, dist_class, rng: np.random.Generator, explore: bool, steps: int,
                 num_envs: int, dist_inputs_key: str = "action_dist_inputs", exploration: Any = None):
        self.net = net
        self.categorical = numpy_kind(dist_class) == CATEGORICAL
        self.explore = explore
        self._key = dist_inputs_key
        self._exploration = exploration
        self._t = 0
        self._noise: Optional[np.ndarray] = None
        self.obs_rows: List[np.ndarray] = []
        self.dist_rows: List[np.ndarray] = []
        self.action_rows: List[np.ndarray] = []
        num_outputs = net.num_outputs
        if explore and self.categorical:
            self._noise = gumbel(rng.random((steps, num_envs, num_outputs), dtype=np.float32))
        elif explore:
            self._noise = rng.standard_normal((steps, num_envs, num_outputs // 2), dtype=np.float32)

    def act(self, obs: np.ndarray, state: Any = None, prev_actions: Any = None, prev_rewards: Any = None,
            timestep: Optional[int] = None) -> Tuple[np.ndarray, list, Dict[str, np.ndarray]]:
        """`(actions, [], {dist_inputs_key: dist_inputs})` for one step's observations
        `[num_envs, ...]` (held, not copied: the sampler never writes them again)."""
        if timestep is not None and self._exploration is not None:
            self._exploration.last_timestep = timestep
        dist_inputs, _ = self.net(obs, values=False)
        noise = self._noise
        t = self._t
        self._t = t + 1
        if self.categorical:
            actions = (dist_inputs + noise[t] if noise is not None else dist_inputs).argmax(axis=1)
        else:
            k = dist_inputs.shape[1] // 2
            mean = dist_inputs[:, :k]
            actions = mean.copy() if noise is None else mean + np.exp(dist_inputs[:, k:]) * noise[t]
        self.obs_rows.append(obs)
        self.dist_rows.append(dist_inputs)
        self.action_rows.append(actions)
        return actions, [], {self._key: dist_inputs}

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


__all__ = ["ChunkActor", "NumpyMLPInference"]
