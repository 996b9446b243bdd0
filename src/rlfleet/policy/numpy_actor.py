"""The NumPy backend of the acting protocol (policy/actor.py) for fully connected policies.

For the small batches a sampler acts on, a torch forward pass costs far more in per-op
dispatch than in arithmetic; `NumpyActor` runs the NumPy snapshot of the policy's model
(`rlfleet.fast.inference.NumpyMLPInference`, rebuilt when the weights change) and per step does only
what the next action needs: log-likelihoods and values come from `finish()`, once.

Whether a policy may act with it is decided in one place, `numpy_actor_unavailable`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from rlfleet.models.distributions import Categorical
from rlfleet.policy.actor import ActResult, Actor
from rlfleet.fast.distributions import categorical_logp, gaussian_logp, sample_numpy
from rlfleet.fast.inference import ChunkActor, NumpyMLPInference
from rlfleet.policy.fast_plan import actor_reason, fast_path_mode
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


def obs_array(obs) -> np.ndarray:
    """Observations as an array: uint8 images stay uint8 (the model scales them), the rest float32."""
    arr = np.asarray(obs)
    return arr if arr.dtype == np.uint8 else arr.astype(np.float32, copy=False)


def static_numpy_reason(policy, acts_its_own_way: bool) -> Optional[str]:
    """Why `policy` (a TorchPolicy, built) can never act with NumPy; None when it may. Read
    once, at the policy's construction (`numpy_actor_unavailable` adds what may change).
    `acts_its_own_way`: the policy's class overrides `compute_actions`."""
    if fast_path_mode(policy.config) == "off":
        return "fast_path is 'off'"
    if policy.is_recurrent():
        return "the model is recurrent"
    if policy.device.type != "cpu":
        return f"the policy acts on {policy.device} (the NumPy copy reads CPU weights)"
    if acts_its_own_way:
        return f"{type(policy).__name__} overrides compute_actions (it acts its own way)"
    return actor_reason(policy)


def numpy_actor_unavailable(policy, timestep: int) -> Optional[str]:
    """Why `policy` cannot act with NumPy at `timestep` (None: it can): the one place the
    NumPy-or-torch choice is made, for `TorchPolicy.actor` and `compute_actions` alike."""
    acting = policy.acting  # acting_state.py
    reason = acting.numpy_reason
    if reason is not None:
        return reason
    random_timesteps = acting.exploration.random_timesteps
    if timestep < random_timesteps:
        return f"timestep {timestep} is one of the exploration's {random_timesteps} random ones"
    if acting.numpy_net(policy.model) is None:
        return acting.numpy_reason  # layers the NumPy copy cannot run (set by `numpy_net`)
    return None


def compute_actions_numpy(policy, obs: np.ndarray, explore: bool, timestep: int) -> ActResult:
    """`compute_actions` with the NumPy snapshot (right after `numpy_actor_unavailable` said
    None, which brought the snapshot `policy.acting.net` up to date): every column at once,
    one forward pass for the actions and the values."""
    acting = policy.acting
    acting.exploration.last_timestep = timestep
    dist_inputs, values = acting.net(obs)
    actions, logp = sample_numpy(policy.dist_class, dist_inputs, explore, policy.np_random)
    extra = {SB.ACTION_DIST_INPUTS: dist_inputs, SB.ACTION_LOGP: logp, SB.ACTION_PROB: np.exp(logp)}
    if policy.records_values:
        extra[SB.VF_PREDS] = values
    return actions, [], extra


def action_logp(dist_class, explore: bool, dist_inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log-likelihoods of `actions` under `dist_inputs` rows; 0 when greedy (as `sample_numpy`
    records them)."""
    if not explore:
        return np.zeros(len(actions), np.float32)
    if dist_class is Categorical:
        return categorical_logp(dist_inputs, actions)
    return gaussian_logp(dist_inputs, actions)


class NumpyActor(Actor):
    """Acts with a NumPy snapshot of a fully connected policy (made by `TorchPolicy.actor`).

    The draws are those `compute_actions` makes (`sample_numpy`, the policy's NumPy
    generator), or, given `steps` and `num_envs` (one sampler chunk), those of
    `rlfleet.fast.inference.ChunkActor`: the whole chunk's noise drawn up front. `act` returns the
    actions and `action_dist_inputs`; `finish` the log-likelihoods, probabilities and (when
    the policy records them) value predictions of the rows acted on.

    Args:
        policy: the acting TorchPolicy.
        net: its NumPy snapshot, held until the actor is dropped.
        explore: sample (True) or act greedily (False).
        timestep: the global timestep of the first step.
        steps, num_envs: a chunk of at most `steps` calls of `num_envs` rows each, or None.
    """

    backend = "numpy"

    def __init__(self, policy, net: NumpyMLPInference, explore: bool, timestep: int, steps: Optional[int] = None,
                 num_envs: Optional[int] = None):
        self._net = net
        self._dist_class = policy.dist_class
        self._rng = policy.np_random
        self._exploration = policy.exploration
        self._exploration.last_timestep = timestep
        self.explore = bool(explore)
        self.deferred = (SB.ACTION_LOGP, SB.ACTION_PROB) + ((SB.VF_PREDS,) if policy.records_values else ())
        self._obs: List[np.ndarray] = []
        self._dist_inputs: List[np.ndarray] = []
        self._actions: List[np.ndarray] = []
        if steps is not None:
            # The sampler's hot path: the chunk actor's `act` is this actor's, no layer between;
            # it keeps the rows in lists of its own, which `finish` reads.
            chunk = ChunkActor(net, policy.dist_class, policy.np_random, self.explore, steps, num_envs,
                               dist_inputs_key=SB.ACTION_DIST_INPUTS, exploration=self._exploration)
            self.act = chunk.act  # type: ignore[method-assign]
            self._obs, self._dist_inputs, self._actions = chunk.obs_rows, chunk.dist_rows, chunk.action_rows

    def act(self, obs: np.ndarray, state: Optional[Sequence[np.ndarray]] = None, prev_actions=None,
            prev_rewards=None, timestep: Optional[int] = None) -> ActResult:
        if timestep is not None:  # else: it was told the first step's (past any random_timesteps)
            self._exploration.last_timestep = timestep
        obs = obs_array(obs)
        dist_inputs, _ = self._net(obs, values=False)
        actions, _ = sample_numpy(self._dist_class, dist_inputs, self.explore, self._rng)
        # Held, not copied: the callers hand in arrays they no longer write to.
        self._obs.append(obs)
        self._dist_inputs.append(dist_inputs)
        self._actions.append(actions)
        return actions, [], {SB.ACTION_DIST_INPUTS: dist_inputs}

    def finish(self, rows: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
        if not self._actions:
            return {key: np.zeros(0, np.float32) for key in self.deferred}
        obs, dist_inputs, actions = (_rows(self._obs), _rows(self._dist_inputs), _rows(self._actions))
        for parts in (self._obs, self._dist_inputs, self._actions):
            parts.clear()  # in place: the chunk actor appends to the same lists
        if rows is not None:  # the value pass costs per row: only the rows asked for
            obs, dist_inputs, actions = (np.take(a, rows, axis=0) for a in (obs_array(obs), dist_inputs, actions))
        logp = action_logp(self._dist_class, self.explore, dist_inputs, actions)
        columns = {SB.ACTION_LOGP: logp, SB.ACTION_PROB: np.exp(logp)}
        if SB.VF_PREDS in self.deferred:
            columns[SB.VF_PREDS] = self._net.values(obs_array(obs))
        return columns


def _rows(parts: List[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


__all__ = ["NumpyActor", "numpy_actor_unavailable", "compute_actions_numpy", "static_numpy_reason", "obs_array",
           "action_logp"]
