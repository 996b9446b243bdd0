"""RLlib 2.x's `Algorithm` methods where their names or shapes differ from 1.x's Trainer:
`save_to_path` / `restore_from_path` and `get_module(...).forward_inference(...)`
(`from_checkpoint`, `train` and `evaluate` are the Trainer's own).

A base class of `Trainer`, in its own module for size, as trainer_state.py is; `rlfleet.Algorithm`
is `Trainer` itself. 2.x's API: https://github.com/ray-project/ray/blob/master/rllib/algorithms/algorithm.py
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from rlfleet.policy.model_inputs import model_inputs
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch


# RLlib 2.x's column names (its `Columns.STATE_IN` / `Columns.STATE_OUT`).
STATE_IN = "state_in"
STATE_OUT = "state_out"


class InferenceModule:
    """A policy's model as RLlib 2.x's `RLModule.forward_inference` calls it.

    2.x modules take the observations after the env-to-module connectors, so this takes them
    after rlfleet's preprocessor and observation filter (for a Box observation space with the
    default `NoFilter`, the env's observations as they are). Like 2.x's torch modules it returns
    torch tensors (a NumPy batch is accepted and converted). A recurrent model (`use_lstm`,
    `use_attention`) steps one time step per row from the `"state_in"` given, or from its
    initial state, and returns its `"state_out"` for the next call, as 2.x's stateful modules do.

    Args:
        policy: the `TorchPolicy` whose model this runs (its weights as they are when called).
    """

    def __init__(self, policy: Any):
        self.policy = policy
        self.model = policy.model

    def is_stateful(self) -> bool:
        """Whether the model is recurrent (it takes `"state_in"` and returns `"state_out"`)."""
        return bool(self.policy.get_initial_state())

    def get_initial_state(self) -> List[torch.Tensor]:
        """The model's initial state, one unbatched tensor per state part (an LSTM's h and c):
        stack one per row for `"state_in"`."""
        return [torch.as_tensor(np.asarray(s, np.float32)) for s in self.policy.get_initial_state()]

    def forward_inference(self, batch: Mapping[str, Any]) -> Dict[str, Any]:
        """The model's outputs for a batch of observations, without exploration and gradients.

        Args:
            batch: `{"obs": [B, ...] observations}` (NumPy or torch); for a recurrent model also
                `"state_in"`: its state, one `[B, ...]` entry per part of `get_initial_state()`
                in that order, as a list or a dict (2.x's LSTM module's `{"h": ..., "c": ...}`;
                its values are taken in order). Without it each row starts from the initial state.
                `"prev_actions"` / `"prev_rewards"` feed a model that reads them (default zeros).

        Returns:
            `{"action_dist_inputs": [B, num_outputs]}` (2.x's `Columns.ACTION_DIST_INPUTS`: the
            logits of a discrete action, mean and log-std of a continuous one), plus
            `"vf_preds": [B]` when the model has a value function (PPO, A2C, IMPALA, ...), and
            `"state_out"` for a recurrent model (the form `"state_in"` had: a list, or a dict
            with its keys; a list when none was given).

        Raises:
            KeyError: no `"obs"`.
            ValueError: a `"state_in"` for a model that has no state, or with another number of
                parts or rows than the model and the observations have.
        """
        if SampleBatch.OBS not in batch:
            raise KeyError(f"forward_inference takes {{'obs': observations}}; got keys {sorted(batch)}")
        obs = _numpy(batch[SampleBatch.OBS])
        state_keys, state_in = self._state_in(batch.get(STATE_IN), len(obs))
        prev_actions, prev_rewards = (batch.get(SampleBatch.PREV_ACTIONS), batch.get(SampleBatch.PREV_REWARDS))
        input_dict, state = model_inputs(self.policy, obs, state_in,
                                         None if prev_actions is None else _numpy(prev_actions, None),
                                         None if prev_rewards is None else _numpy(prev_rewards))
        out: Dict[str, Any] = {}
        with torch.inference_mode():
            out[SampleBatch.ACTION_DIST_INPUTS], state_out = self.model(input_dict, state, None)
            if getattr(self.model, "has_value_function", False):
                out[SampleBatch.VF_PREDS] = self.model.value_function()
        if state:
            state_out = list(state_out)
            out[STATE_OUT] = dict(zip(state_keys, state_out)) if state_keys else state_out
        return out

    def _state_in(self, given: Any, rows: int) -> Tuple[Optional[List[Any]], Optional[List[np.ndarray]]]:
        if given is None:
            return None, None
        parts = len(self.policy.get_initial_state())
        keys = list(given) if isinstance(given, Mapping) else None
        values = [_numpy(v) for v in (given.values() if isinstance(given, Mapping) else given)]
        if not parts:
            raise ValueError(f"forward_inference: 'state_in' given, but {type(self.model).__name__} is not "
                             "recurrent (set model use_lstm/use_attention for a stateful module); remove it")
        if len(values) != parts or any(len(v) != rows for v in values):
            raise ValueError(f"forward_inference: 'state_in' needs {parts} parts (get_initial_state()'s, in that "
                             f"order), each with one row per observation ({rows}); got shapes "
                             f"{[tuple(v.shape) for v in values]}")
        return keys, values

    def __repr__(self) -> str:
        return f"InferenceModule({type(self.model).__name__})"


def _numpy(value: Any, dtype: Any = np.float32) -> np.ndarray:
    # A torch tensor keeps its dtype; other values become `dtype` (None: NumPy's choice, as
    # for discrete previous actions).
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value, dtype)


class AlgorithmMethods:
    """2.x's `Algorithm` methods on the Trainer; they reach it through `save`, `restore` and
    `get_policy`."""

    def save_to_path(self, path: Optional[str] = None) -> str:
        """Writes a checkpoint into the folder `path` itself (2.x's layout: no
        `checkpoint_<n>/` below it), as `save()` writes one.

        Args:
            path: the checkpoint folder; a folder holding an rlfleet checkpoint is replaced.
                Default: a new temporary folder.

        Returns:
            The checkpoint folder's path (for `restore_from_path` / `Algorithm.from_checkpoint`).

        Raises:
            FileExistsError: `path` is a non-empty folder that holds no rlfleet checkpoint
                (it is never deleted to make room).
        """
        from rlfleet.checkpoint import save_trainer
        from rlfleet.checkpoint.folder import MANIFEST

        if path is None:
            path = tempfile.mkdtemp(prefix="rlfleet_checkpoint_")
        path = os.path.abspath(os.path.expanduser(path))
        if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, MANIFEST)):
            raise FileExistsError(f"save_to_path({path!r}): the folder holds other files and no rlfleet "
                                  "checkpoint; give an empty or new folder (or save(parent) for checkpoint_<n>/)")
        return save_trainer(self, path=path)

    def restore_from_path(self, path: Any) -> None:
        """2.x's name for `restore(path)`: a checkpoint folder of the same algorithm, or a folder
        or Ray Tune `Checkpoint` holding one (`results.get_best_result(...).checkpoint`)."""
        self.restore(path)

    def get_module(self, policy_id: str = DEFAULT_POLICY_ID) -> InferenceModule:
        """The policy's model as a 2.x RL module (`forward_inference({"obs": batch})`).

        Args:
            policy_id: 2.x's module id: the policy id (default "default_policy").
        """
        policy = self.get_policy(policy_id)
        if policy is None or not hasattr(policy, "model"):
            raise KeyError(f"No policy with a model named {policy_id!r}")
        return InferenceModule(policy)
