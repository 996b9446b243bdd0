"""Export of DreamerV3's acting path: one greedy step of encoder + RSSM + actor, with the
recurrent state passed in and out, as TorchScript (`model.pt`) or ONNX (`model.onnx`).

Inputs: `obs [B, ...]` (preprocessed), `h [B, deter]`, `z [B, S*C]`, `prev_action [B, A]`
(the previous action as the RSSM reads it: one-hot for Discrete); outputs: `action` (class
index or a vector in [-1, 1] before unsquashing to the env's bounds), then the next `h`, `z`,
`prev_action`. Start an episode from zeros for the three states (`policy.get_initial_state()`).
The world model's decoder and heads and the critic are not part of acting and not exported.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Optional

import numpy as np
import torch
from torch import nn


class _ActingStep(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, obs, h, z, prev_action):
        return self.model.act(obs, h, z, prev_action, None, greedy=True)


def export_acting_step(policy: Any, export_dir: str, onnx: Optional[int] = None, **kwargs: Any) -> str:
    """Writes the greedy acting step (module docstring) and `model.json`; returns the model file.

    Raises:
        ValueError: for the generic export's preprocessor / filter options, which this graph
            does not take (it reads preprocessed observations).
    """
    given = sorted(k for k, v in kwargs.items() if v is not None and k != "include_filter")
    if given:
        raise ValueError(f"DreamerV3's export takes preprocessed observations; {given} cannot be put into its "
                         "graph: call policy.export_model(export_dir, onnx) without them")
    os.makedirs(export_dir, exist_ok=True)
    obs = torch.as_tensor(np.zeros((2, *policy.observation_space.shape), np.float32))
    state = [torch.as_tensor(np.repeat(s[None], 2, 0)) for s in policy.get_initial_state()]
    step = _ActingStep(policy.model).eval()
    names_in, names_out = ["obs", "h", "z", "prev_action"], ["action", "h_out", "z_out", "prev_action_out"]
    with warnings.catch_warnings(), torch.no_grad():
        # torch 2.9+ marks both exporters deprecated; they still work (see policy/export.py).
        warnings.simplefilter("ignore", DeprecationWarning)
        if onnx is None:
            filename = "model.pt"
            traced = torch.jit.trace(step, (obs, *state), check_trace=False)
            traced.save(os.path.join(export_dir, filename))
        else:
            filename = "model.onnx"
            # The TorchScript-based exporter: the dynamo one needs onnxscript, no dependency here.
            torch.onnx.export(step, (obs, *state), os.path.join(export_dir, filename), opset_version=int(onnx),
                              dynamo=False, input_names=names_in, output_names=names_out,
                              dynamic_axes={n: {0: "batch"} for n in names_in + names_out})
    meta = {"algorithm": "DreamerV3", "file": filename, "inputs": names_in, "outputs": names_out,
            "state_shapes": [list(s.shape[1:]) for s in state], "observations": "preprocessed"}
    with open(os.path.join(export_dir, "model.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return os.path.join(export_dir, filename)


__all__ = ["export_acting_step"]
