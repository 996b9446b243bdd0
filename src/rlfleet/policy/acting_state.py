"""`ActingState`: what a TorchPolicy acts with, apart from what it learns with
(learning_state.py), as Tianshou keeps collection apart from learning: the exploration, the
NumPy snapshot of the model (numpy_actor.py acts with it) and why acting cannot use it; plus
`act_torch`, acting with the torch model.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.fast.inference import NumpyMLPInference
from rlfleet.policy.model_inputs import model_inputs
from rlfleet.policy.sample_batch import SampleBatch

# The prefix of an exploration's own weights among the policy's (`get_weights`).
EXPLORATION_WEIGHTS = "exploration."


class ActingState:
    """A policy's exploration and the NumPy snapshot of its model.

    Args:
        exploration: the policy's exploration (`make_exploration`).
        numpy_reason: why acting can never run on the NumPy snapshot (None: it may; see
            numpy_actor.static_numpy_reason); `numpy_net` sets it when the model has layers
            the snapshot cannot copy.
    """

    def __init__(self, exploration: Exploration, numpy_reason: Optional[str] = None):
        self.exploration = exploration
        self.numpy_reason = numpy_reason
        # The snapshot, and what it was built from: the model, its parameters (cached:
        # walking the modules per step cost more than the forward pass) and their versions.
        self.net: Optional[NumpyMLPInference] = None
        self._key: Optional[tuple] = None
        self._params: Optional[Tuple[torch.nn.Module, List[torch.Tensor]]] = None

    def numpy_net(self, model: torch.nn.Module) -> Optional[NumpyMLPInference]:
        """The NumPy snapshot of `model`, rebuilt when a parameter changed in place (its
        `_version`) or the model was replaced. None when the model has layers it cannot copy."""
        params = self._params
        if params is None or params[0] is not model:
            params = self._params = (model, list(model.parameters()))
        key = tuple(p._version for p in params[1])
        if self.net is None or key != self._key:
            self.net = NumpyMLPInference(model)
            self._key = key
            if not self.net.ok:
                self.numpy_reason = "the model has layers the NumPy copy cannot run"
                return None
        return self.net

    # --- the exploration's weights, among the policy's -----------------------------------
    def exploration_weights(self) -> Dict[str, np.ndarray]:
        """The exploration's own weights (Curiosity's ICM), prefixed `exploration.`."""
        return {EXPLORATION_WEIGHTS + k: v for k, v in self.exploration.get_weights().items()}

    def load_exploration_weights(self, weights: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Hands the `exploration.` entries of `weights` to the exploration (one without
        networks ignores them: an evaluation policy with another exploration); returns the
        model's entries."""
        own = {k[len(EXPLORATION_WEIGHTS):]: v for k, v in weights.items() if k.startswith(EXPLORATION_WEIGHTS)}
        if not own:
            return weights
        self.exploration.set_weights(own)
        return {k: v for k, v in weights.items() if not k.startswith(EXPLORATION_WEIGHTS)}


def act_torch(policy: Any, obs: np.ndarray, state_batches, prev_action_batch, prev_reward_batch, explore: bool,
              timestep: int) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
    """`compute_actions` with the torch model: the exploration's forward pass (the plain one
    unless it perturbs the weights, as ParameterNoise does) and its actions, sampled on the
    CPU with the policy's own generator."""
    exploration = policy.exploration
    input_dict, state = model_inputs(policy, obs, state_batches, prev_action_batch, prev_reward_batch)
    with torch.inference_mode():
        dist_inputs, state_out = exploration.forward_for_acting(policy.model, input_dict, state, explore, timestep)
        if policy.device.type != "cpu":
            dist_inputs, state_out = dist_inputs.cpu(), [s.cpu() for s in state_out]
        dist = policy.dist_class(dist_inputs, policy.model)
        actions, logp = exploration.get_exploration_action(dist, explore, timestep, policy.generator)
        extra = {
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.numpy(),
            SampleBatch.ACTION_LOGP: logp.numpy(),
            SampleBatch.ACTION_PROB: torch.exp(logp).numpy(),
        }
        if policy.records_values:
            extra[SampleBatch.VF_PREDS] = policy.model.value_function().cpu().numpy()
    return actions.numpy(), [s.numpy() for s in state_out], extra


__all__ = ["ActingState", "EXPLORATION_WEIGHTS", "act_torch"]
