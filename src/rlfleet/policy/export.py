"""Exporting a policy for serving (TorchScript, ONNX) and its weights alone (safetensors).

A trainer's export (`Trainer.export_policy_model`, `Trainer.export_model`) takes raw env
observations: the preprocessor and the observation filter's statistics, frozen at export
time, are part of the graph (policy/export_observations.py), so the exported model acts as
`compute_single_action(obs, explore=False)` does. Its outputs, in this order:

| output          | what                                                                       |
| --------------- | -------------------------------------------------------------------------- |
| `actions`       | the greedy action as the env takes it (one output per leaf for Dict / Tuple action spaces: `actions.<key>`); see policy/export_actions.py |
| `dist_inputs`   | the action distribution's inputs `[B, K]` (logits, Q-values, means and log-stds) |
| `value`         | the value head's `[B]` (models with one)                                   |
| `state_out_k`   | recurrent models: the state after this step                               |

Recurrent models export one step: inputs `obs...`, then `prev_actions` / `prev_rewards` (only
when the model reads them), then `state_in_k` (the policy's initial state, zeros, at an
episode start). With `include_filter=False` the model is bare: its one input `obs` is the
preprocessed, filtered observation, and `filter.json` beside it holds the statistics to apply
(export_observations.py documents it; every trainer export writes one, noting whether the
graph applies it). `Policy.export_model` called on a policy alone knows no preprocessor or
filter: it exports the bare model. `model.json` records the inputs (names, shapes, dtypes),
the outputs, the action distribution and the spaces.

Weights alone: policy/export_weights.py.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from rlfleet.policy.export_actions import GreedyEnvActions
from rlfleet.policy.export_observations import (FILTER_FILE, RawObservations, filter_statistics, model_input_spec,
                                                write_filter_json)
from rlfleet.policy.export_weights import (WEIGHTS_FORMAT, export_policy_weights, import_policy_weights,
                                           read_policy_weights, space_record)
from rlfleet.utils.safe_files import json_bytes, write_file_atomic
from rlfleet.utils.versions import software_versions

MODEL_FORMAT = "rlfleet-exported-model"
FORMAT_VERSION = 2  # 2: raw observations in, `actions` first out; 1: filtered observations in


class _PolicyGraph(torch.nn.Module):
    """`(obs inputs..., [prev_actions], [prev_rewards], state_in...) -> (actions..., dist_inputs,
    [value], state_out...)` around the policy's live model."""

    def __init__(self, model: torch.nn.Module, observations: Optional[torch.nn.Module], num_obs_inputs: int,
                 prev_columns: Sequence[str], actions: GreedyEnvActions, with_value: bool):
        super().__init__()
        self.model = model
        self.observations = observations
        self.num_obs_inputs = num_obs_inputs
        self.prev_columns = tuple(prev_columns)
        self.actions = actions
        self.with_value = with_value

    def forward(self, *inputs: torch.Tensor):
        n = self.num_obs_inputs
        obs = inputs[0] if self.observations is None else self.observations(*inputs[:n])
        input_dict = {"obs": obs}
        for name, value in zip(self.prev_columns, inputs[n:]):
            input_dict[name] = value
        state = list(inputs[n + len(self.prev_columns):])
        out, state_out = self.model(input_dict, state, None)
        value = (self.model.value_function(),) if self.with_value else ()
        return (*self.actions(out), out, *value, *state_out)


def export_policy_model(policy, export_dir: str, onnx: Optional[int] = None, *, preprocessor: Any = None,
                        observation_filter: Any = None, include_filter: bool = True) -> str:
    """Writes `export_dir/model.pt` (TorchScript), or `export_dir/model.onnx` with ONNX opset
    `onnx`, plus `model.json` (and `filter.json` when a preprocessor is given); returns the
    model file's path. See the module docstring for the inputs and outputs.

    Args:
        policy: a TorchPolicy.
        export_dir: the folder to write into (created if needed).
        onnx: the ONNX opset to export with; None writes TorchScript.
        preprocessor: the policy's observation preprocessor (a rollout worker's
            `preprocessors[policy_id]`); None: the graph takes the model's input.
        observation_filter: the worker's `filters[policy_id]` (its current statistics are frozen).
        include_filter: put the preprocessor and filter into the graph (raw observations in);
            False: the bare model, with the filter's statistics in `filter.json` beside it.
    """
    if preprocessor is not None:
        filter_statistics(observation_filter)  # a filter it cannot freeze is refused before anything is written
    os.makedirs(export_dir, exist_ok=True)
    raw = preprocessor is not None and include_filter
    if raw:
        observations = RawObservations(preprocessor, observation_filter)
        obs_names, obs_examples = observations.inputs.names, observations.inputs.examples
        obs_meta = observations.inputs.describe()
    else:
        observations = None
        filtered = observation_filter is not None and type(observation_filter).__name__ != "NoFilter"
        obs_names, obs_examples, obs_meta = model_input_spec(policy.observation_space, filtered)
    model = policy.model
    was_training = model.training
    model.eval()
    try:
        with policy.acting_greedily():
            filename, io = _trace(policy, export_dir, onnx, observations, obs_names, obs_examples, obs_meta)
    finally:
        model.train(was_training)
    filter_file = None
    if preprocessor is not None:
        write_filter_json(observation_filter, export_dir, in_graph=raw)
        filter_file = FILTER_FILE
    _write_model_meta(policy, export_dir, filename, onnx, {
        **io, "observations": "raw" if raw else "preprocessed, filtered", "filter_file": filter_file})
    return os.path.join(export_dir, filename)


def _trace(policy, export_dir: str, onnx: Optional[int], observations: Optional[torch.nn.Module],
           obs_names: List[str], obs_examples: List[torch.Tensor], obs_meta: Dict[str, Any]):
    """Builds the graph, runs it once on zeros (models cache tensors from their last forward
    pass) and saves it; returns the file name and `model.json`'s inputs / outputs entries."""
    model = policy.model
    init = policy.get_initial_state()
    prev = tuple(policy.view_columns) if init else ()
    examples = list(obs_examples)
    if "prev_actions" in prev:
        from rlfleet.utils.spaces import action_layout

        shape, dtype = action_layout(policy.action_space)
        examples.append(torch.zeros((2, *shape), dtype=torch.float32 if np.dtype(dtype).kind == "f" else torch.int64))
    if "prev_rewards" in prev:
        examples.append(torch.zeros(2, dtype=torch.float32))
    examples += [torch.as_tensor(np.repeat(s[None], 2, axis=0)) for s in init]
    cfg = policy.config
    actions = GreedyEnvActions(policy.dist_class, model, policy.action_space,
                               bool(cfg.get("normalize_actions", True)), bool(cfg.get("clip_actions", False)))
    with_value = bool(getattr(model, "has_value_function", True))
    graph = _PolicyGraph(model, observations, len(obs_names), prev, actions, with_value)
    with torch.no_grad():
        graph(*examples)
    inputs = [*obs_names, *prev, *[f"state_in_{k}" for k in range(len(init))]]
    outputs = [*actions.names, "dist_inputs", *(["value"] if with_value else []),
               *[f"state_out_{k}" for k in range(len(init))]]
    filename = _save_traced(graph, tuple(examples), export_dir, onnx, inputs, outputs)
    described = {**obs_meta, **{name: {"shape": [None, *map(int, ex.shape[1:])],
                                       "dtype": str(ex.dtype).replace("torch.", "")}
                                for name, ex in zip(inputs[len(obs_names):], examples[len(obs_names):])}}
    io: Dict[str, Any] = {"inputs": described, "outputs": outputs,
                          "actions": {"outputs": actions.names, "meaning": "greedy (explore=False) actions as the env "
                                      "takes them, as compute_single_action returns them"}}
    if init:
        io.update(recurrent=True, initial_state=[list(map(int, s.shape)) for s in init],
                  meaning="one step per row; feed state_out_k back as state_in_k, zeros at an episode start")
    return filename, io


def _save_traced(wrapper: torch.nn.Module, examples: tuple, export_dir: str, onnx: Optional[int],
                 inputs: List[str], outputs: List[str]) -> str:
    """Traces `wrapper` on `examples` into `export_dir/model.pt` (TorchScript) or, with an
    opset `onnx`, `model.onnx` (batch dimension dynamic); returns the file name."""
    filename = "model.pt" if onnx is None else "model.onnx"
    tmp = os.path.join(export_dir, f".{filename}.tmp-{os.getpid()}")
    with warnings.catch_warnings():
        # torch 2.9+ marks TorchScript and the TorchScript-based ONNX exporter deprecated;
        # both still work and need no extra packages (the dynamo exporter needs onnxscript).
        warnings.simplefilter("ignore", DeprecationWarning)
        with torch.no_grad():
            if onnx is None:
                torch.jit.save(torch.jit.trace(wrapper, examples, check_trace=False), tmp)
            else:
                torch.onnx.export(wrapper, examples, tmp, opset_version=int(onnx), dynamo=False,
                                  input_names=inputs, output_names=outputs,
                                  dynamic_axes={name: {0: "batch"} for name in inputs + outputs})
    os.replace(tmp, os.path.join(export_dir, filename))
    return filename


def _write_model_meta(policy, export_dir: str, filename: str, onnx: Optional[int], io: Dict[str, Any]) -> None:
    """Writes `model.json` beside an exported model: the format, the model file and its
    kind, `io` (its inputs and outputs), the action distribution and the spaces."""
    versions = software_versions()
    dist = policy.dist_class
    meta = {
        "format": MODEL_FORMAT,
        "format_version": FORMAT_VERSION,
        "rlfleet_version": versions["rlfleet"],
        "versions": versions,
        "file": filename,
        "kind": "torchscript" if onnx is None else "onnx",
        "onnx_opset": None if onnx is None else int(onnx),
        **io,
        "action_dist": getattr(dist, "__name__", None) or type(dist).__name__,
        "observation_space": space_record(policy.observation_space),
        "action_space": space_record(policy.action_space),
    }
    write_file_atomic(os.path.join(export_dir, "model.json"), json_bytes(meta))


def export_recurrent_policy_model(policy, export_dir: str, onnx: Optional[int] = None, **kwargs: Any) -> str:
    """`export_policy_model` (which exports recurrent policies as one step) under its old name."""
    return export_policy_model(policy, export_dir, onnx, **kwargs)


EXPORT_FORMATS = ("checkpoint", "model", "onnx")


def export_policy_formats(policy, formats, export_dir: str, *, preprocessor: Any = None,
                          observation_filter: Any = None) -> Dict[str, str]:
    """`policy` exported in each of `formats` ("model": TorchScript, "onnx": ONNX with opset
    `$ONNX_OPSET` (default 11), "checkpoint": weights) into `export_dir/<format>/`; the
    models take raw observations when `preprocessor` (and `observation_filter`) are given.

    Returns:
        `{format: path}`.
    """
    formats = [formats] if isinstance(formats, str) else list(formats)
    bad = [f for f in formats if f not in EXPORT_FORMATS]
    if bad:
        hint = " (Keras h5 is not supported: use 'checkpoint' and import_model)" if "h5" in bad else ""
        raise ValueError(f"export_model: unknown export format(s) {bad}; valid: {list(EXPORT_FORMATS)}{hint}")
    out: Dict[str, str] = {}
    pipeline = {"preprocessor": preprocessor, "observation_filter": observation_filter}
    for fmt in formats:
        target = os.path.join(export_dir, fmt)
        if fmt == "checkpoint":
            out[fmt] = policy.export_checkpoint(target)
        elif fmt == "model":
            out[fmt] = policy.export_model(target, **pipeline)
        else:
            out[fmt] = policy.export_model(target, int(os.environ.get("ONNX_OPSET", "11")), **pipeline)
    return out


__all__ = ["EXPORT_FORMATS", "MODEL_FORMAT", "WEIGHTS_FORMAT", "export_policy_formats", "export_policy_model",
           "export_policy_weights", "import_policy_weights", "read_policy_weights"]
