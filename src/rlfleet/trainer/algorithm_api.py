"""RLlib 2.x's `Algorithm` methods where their names or shapes differ from 1.x's Trainer:
`save_to_path` / `restore_from_path` and `get_module(...).forward_inference(...)`
(`from_checkpoint`, `train` and `evaluate` are the Trainer's own).

A base class of `Trainer`, in its own module for size, as trainer_state.py is; `rlfleet.Algorithm`
is `Trainer` itself. 2.x's API: https://github.com/ray-project/ray/blob/master/rllib/algorithms/algorithm.py
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Mapping, Optional

import numpy as np
import torch

from rlfleet.policy.model_inputs import model_inputs
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch


class InferenceModule:
    """A policy's model as RLlib 2.x's `RLModule.forward_inference` calls it.

    2.x modules take the observations after the env-to-module connectors, so this takes them
    after rlfleet's preprocessor and observation filter (for a Box observation space with the
    default `NoFilter`, the env's observations as they are). Like 2.x's torch modules it returns
    torch tensors (a NumPy batch is accepted and converted). A recurrent model starts each call
    from its initial state.

    Args:
        policy: the `TorchPolicy` whose model this runs (its weights as they are when called).
    """

    def __init__(self, policy: Any):
        self.policy = policy
        self.model = policy.model

    def forward_inference(self, batch: Mapping[str, Any]) -> Dict[str, torch.Tensor]:
        """The model's outputs for a batch of observations, without exploration and gradients.

        Args:
            batch: `{"obs": [B, ...] observations}` (NumPy or torch).

        Returns:
            `{"action_dist_inputs": [B, num_outputs]}` (2.x's `Columns.ACTION_DIST_INPUTS`: the
            logits of a discrete action, mean and log-std of a continuous one), plus
            `"vf_preds": [B]` when the model has a value function (PPO, A2C, IMPALA, ...).
        """
        if SampleBatch.OBS not in batch:
            raise KeyError(f"forward_inference takes {{'obs': observations}}; got keys {sorted(batch)}")
        obs = batch[SampleBatch.OBS]
        obs = obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else np.asarray(obs, np.float32)
        input_dict, state = model_inputs(self.policy, obs, None, None, None)
        out: Dict[str, torch.Tensor] = {}
        with torch.inference_mode():
            out[SampleBatch.ACTION_DIST_INPUTS], _ = self.model(input_dict, state, None)
            if getattr(self.model, "has_value_function", False):
                out[SampleBatch.VF_PREDS] = self.model.value_function()
        return out

    def __repr__(self) -> str:
        return f"InferenceModule({type(self.model).__name__})"


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

    def restore_from_path(self, path: str) -> None:
        """2.x's name for `restore(path)`: a checkpoint folder of the same algorithm."""
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
