"""Exporting a policy for serving (TorchScript, ONNX) and its weights alone (safetensors).

The exported model maps a float32 batch of *preprocessed, filtered* observations
`[B, *obs_shape]` (what the policy's `compute_actions` sees, as in RLlib 1.x) to the
action-distribution inputs `[B, K]` and, when the model has a value head, the values `[B]`.
A `model.json` beside it records the input/output names, the action distribution and the
spaces. Exported weights (`<prefix>.safetensors` + `<prefix>.json`) load back with
`import_policy_weights`, which checks their checksum and shapes and never runs code: the
policy class, action distribution and model config the metadata names are there for people
and serving code to read; nothing here imports a name recorded in it.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from rlfleet.utils.json_codec import encode, encode_space, qualified_name
from rlfleet.utils.safe_files import (
    CheckpointError,
    check_weights_fit,
    json_bytes,
    parse_safetensors,
    read_small_json,
    read_verified,
    safetensors_bytes,
    write_file_atomic,
)
from rlfleet.utils.versions import software_versions

WEIGHTS_FORMAT = "rlfleet-policy-weights"
MODEL_FORMAT = "rlfleet-exported-model"
FORMAT_VERSION = 1


class _ModelForExport(torch.nn.Module):
    """`obs -> (dist_inputs, value)` around a copy of a policy model (no state, no dicts)."""

    def __init__(self, model: torch.nn.Module, with_value: bool):
        super().__init__()
        self.model = model
        self.with_value = with_value

    def forward(self, obs: torch.Tensor):
        out, _ = self.model({"obs": obs}, [], None)
        if self.with_value:
            return out, self.model.value_function()
        return out


def _wrap(policy) -> tuple:
    if policy.is_recurrent():
        raise ValueError(f"{type(policy).__name__} is recurrent (use_lstm): exporting recurrent policies is not "
                         "supported; export a feed-forward policy, or save a checkpoint instead")
    # The live model (a deepcopy trips over tensors cached from the last forward pass);
    # tracing it only overwrites those caches. The caller puts it in eval mode.
    model = policy.model
    example = torch.zeros((2, *policy.observation_space.shape), dtype=torch.float32)
    with torch.no_grad():
        model({"obs": example}, [], None)
    return _ModelForExport(model, getattr(model, "has_value_function", True)), example


def _space(space) -> Any:
    try:
        return encode_space(space)
    except ValueError:
        return repr(space)


def _dist_name(policy) -> str:
    dist = policy.dist_class
    return getattr(dist, "__name__", None) or type(dist).__name__


def export_policy_model(policy, export_dir: str, onnx: Optional[int] = None) -> str:
    """Writes `export_dir/model.pt` (TorchScript), or `export_dir/model.onnx` with ONNX opset
    `onnx` when given, plus `export_dir/model.json`; returns the model file's path.

    Args:
        policy: a TorchPolicy.
        export_dir: the folder to write into (created if needed).
        onnx: the ONNX opset to export with; None writes TorchScript.
    """
    if policy.is_recurrent():
        return export_recurrent_policy_model(policy, export_dir, onnx)
    os.makedirs(export_dir, exist_ok=True)
    was_training = policy.model.training
    policy.model.eval()
    try:
        filename = _export(policy, export_dir, onnx)
    finally:
        policy.model.train(was_training)
    return os.path.join(export_dir, filename)


def _export(policy, export_dir: str, onnx: Optional[int]) -> str:
    wrapper, example = _wrap(policy)
    outputs = ["dist_inputs", "value"] if wrapper.with_value else ["dist_inputs"]
    filename = _save_traced(wrapper, (example,), export_dir, onnx, ["obs"], outputs)
    _write_model_meta(policy, export_dir, filename, onnx, {
        "inputs": {"obs": {"shape": [None, *map(int, policy.observation_space.shape)], "dtype": "float32",
                           "meaning": "preprocessed, filtered observations"}},
        "outputs": outputs,
    })
    return filename


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
    meta = {
        "format": MODEL_FORMAT,
        "format_version": FORMAT_VERSION,
        "rlfleet_version": versions["rlfleet"],
        "versions": versions,
        "file": filename,
        "kind": "torchscript" if onnx is None else "onnx",
        "onnx_opset": None if onnx is None else int(onnx),
        **io,
        "action_dist": _dist_name(policy),
        "observation_space": _space(policy.observation_space),
        "action_space": _space(policy.action_space),
    }
    write_file_atomic(os.path.join(export_dir, "model.json"), json_bytes(meta))


def export_policy_weights(policy, export_dir: str, filename_prefix: str = "model") -> str:
    """Writes `export_dir/<prefix>.safetensors` (the model's weights) and `<prefix>.json`
    (format, shapes, spaces, model config, checksum); returns the JSON file's path."""
    os.makedirs(export_dir, exist_ok=True)
    weights = policy.get_weights()
    weights_file = f"{filename_prefix}.safetensors"
    record = write_file_atomic(os.path.join(export_dir, weights_file), safetensors_bytes(weights))
    versions = software_versions()
    meta = {
        "format": WEIGHTS_FORMAT,
        "format_version": FORMAT_VERSION,
        "rlfleet_version": versions["rlfleet"],
        "versions": versions,
        "policy_class": qualified_name(type(policy)),
        "files": {weights_file: record},
        "weights": weights_file,
        "shapes": {k: list(np.shape(v)) for k, v in weights.items()},
        "observation_space": _space(policy.observation_space),
        "action_space": _space(policy.action_space),
        "model_config": encode(policy.config.get("model")),
    }
    path = os.path.join(export_dir, f"{filename_prefix}.json")
    write_file_atomic(path, json_bytes(meta))
    return path


EXPORT_FORMATS = ("checkpoint", "model", "onnx")


def export_policy_formats(policy, formats, export_dir: str) -> Dict[str, str]:
    """`policy` exported in each of `formats` ("model": TorchScript, "onnx": ONNX with opset
    `$ONNX_OPSET` (default 11), "checkpoint": weights) into `export_dir/<format>/`.

    Returns:
        `{format: path}`.
    """
    formats = [formats] if isinstance(formats, str) else list(formats)
    bad = [f for f in formats if f not in EXPORT_FORMATS]
    if bad:
        hint = " (Keras h5 is not supported: use 'checkpoint' and import_model)" if "h5" in bad else ""
        raise ValueError(f"export_model: unknown export format(s) {bad}; valid: {list(EXPORT_FORMATS)}{hint}")
    out: Dict[str, str] = {}
    for fmt in formats:
        target = os.path.join(export_dir, fmt)
        if fmt == "checkpoint":
            out[fmt] = policy.export_checkpoint(target)
        elif fmt == "model":
            out[fmt] = policy.export_model(target)
        else:
            out[fmt] = policy.export_model(target, int(os.environ.get("ONNX_OPSET", "11")))
    return out


def read_policy_weights(path: str) -> Dict[str, np.ndarray]:
    """The weights exported by `export_policy_weights`: `path` is the export folder (with
    `model.json`), the `.json` file, or the `.safetensors` file (checked against the JSON
    beside it when there is one)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "model.json")
    if path.endswith(".safetensors"):
        sidecar = path[: -len(".safetensors")] + ".json"
        if not os.path.isfile(sidecar):
            if not os.path.isfile(path):
                raise CheckpointError(f"import_model: no weights file at {path!r}")
            with open(path, "rb") as f:
                return parse_safetensors(f.read(), path)
        path = sidecar
    if not path.endswith(".json"):
        raise CheckpointError(f"import_model: {path!r} is neither an export folder, a .json nor a .safetensors "
                              "file (rlfleet imports only its own exported weights; nothing is unpickled)")
    meta = read_small_json(path, "import_model")
    if not isinstance(meta, dict) or meta.get("format") != WEIGHTS_FORMAT:
        raise CheckpointError(f"import_model: {path!r} is not an rlfleet weights file (format "
                              f"{meta.get('format') if isinstance(meta, dict) else None!r}, expected {WEIGHTS_FORMAT!r})")
    if not isinstance(meta.get("format_version"), int) or meta["format_version"] > FORMAT_VERSION:
        raise CheckpointError(f"import_model: {path!r} has format version {meta.get('format_version')!r}; this "
                              f"rlfleet reads up to {FORMAT_VERSION}: upgrade rlfleet")
    rel, files = meta.get("weights"), meta.get("files")
    if not isinstance(rel, str) or not rel.endswith(".safetensors") or not isinstance(files, dict) \
            or not isinstance(files.get(rel), dict):
        raise CheckpointError(f"import_model: {path!r} names no checksummed .safetensors weights file")
    root = os.path.dirname(os.path.abspath(path))
    data = read_verified(root, rel, files[rel], path)
    return parse_safetensors(data, os.path.join(root, rel))


def import_policy_weights(policy, path: str) -> None:
    """Loads weights written by `export_policy_weights` into `policy` (shapes checked first)."""
    weights = read_policy_weights(path)
    check_weights_fit(weights, policy.get_weights(), f"weights {path!r}")
    policy.set_weights(weights)


__all__ = ["export_policy_model", "export_policy_weights", "read_policy_weights", "import_policy_weights"]


# --- recurrent policies (use_lstm, use_attention) --------------------------------------
class _RecurrentModelForExport(torch.nn.Module):
    """One step per row: `(obs, [prev_actions], [prev_rewards], state_in_0..k) ->
    (dist_inputs, [value], state_out_0..k)`; feed each step's state outputs back in (the
    model's initial state, zeros, at an episode start)."""

    def __init__(self, model: torch.nn.Module, with_value: bool, num_states: int, prev_columns: tuple):
        super().__init__()
        self.model = model
        self.with_value = with_value
        self.num_states = num_states
        self.prev_columns = prev_columns

    def forward(self, obs: torch.Tensor, *rest: torch.Tensor):
        input_dict = {"obs": obs}
        for name, value in zip(self.prev_columns, rest):
            input_dict[name] = value
        state = list(rest[len(self.prev_columns):])
        out, state_out = self.model(input_dict, state, None)
        head = (out, self.model.value_function()) if self.with_value else (out,)
        return (*head, *state_out)


def export_recurrent_policy_model(policy, export_dir: str, onnx: Optional[int] = None) -> str:
    """Exports a recurrent policy (TorchScript, or ONNX with opset `onnx`) as one step of
    `obs [B, ...]`, `prev_actions` / `prev_rewards` (only when the model reads them) and
    `state_in_k` (shapes from `policy.get_initial_state()`, with a batch dim) to
    `dist_inputs`, `value` (when the model has a value head) and `state_out_k`. Writes
    `model.json` with the input / output names, shapes and the initial state's shapes;
    returns the model file's path.
    """
    os.makedirs(export_dir, exist_ok=True)
    model = policy.model
    was_training = model.training
    model.eval()
    try:
        init = policy.get_initial_state()
        prev = tuple(policy.view_columns)
        examples = [torch.zeros((2, *policy.observation_space.shape), dtype=torch.float32)]
        if "prev_actions" in prev:
            from rlfleet.utils.spaces import action_layout

            shape, dtype = action_layout(policy.action_space)
            examples.append(torch.zeros((2, *shape), dtype=torch.float32 if np.dtype(dtype).kind == "f"
                                        else torch.int64))
        if "prev_rewards" in prev:
            examples.append(torch.zeros(2, dtype=torch.float32))
        examples += [torch.as_tensor(np.repeat(s[None], 2, axis=0)) for s in init]
        with torch.no_grad():
            model({"obs": examples[0], **dict(zip(prev, examples[1:]))}, examples[1 + len(prev):], None)
        with_value = bool(getattr(model, "has_value_function", True))
        wrapper = _RecurrentModelForExport(model, with_value, len(init), prev)
        states_in = [f"state_in_{k}" for k in range(len(init))]
        states_out = [f"state_out_{k}" for k in range(len(init))]
        inputs = ["obs", *prev, *states_in]
        outputs = ["dist_inputs", *(["value"] if with_value else []), *states_out]
        filename = _save_traced(wrapper, tuple(examples), export_dir, onnx, inputs, outputs)
    finally:
        model.train(was_training)
    _write_model_meta(policy, export_dir, filename, onnx, {
        "recurrent": True,
        "inputs": {name: {"shape": [None, *map(int, ex.shape[1:])], "dtype": str(ex.dtype).replace("torch.", "")}
                   for name, ex in zip(inputs, examples)},
        "outputs": outputs,
        "initial_state": [list(map(int, s.shape)) for s in init],
        "meaning": "one step per row; feed state_out_k back as state_in_k, zeros at an episode start",
    })
    return os.path.join(export_dir, filename)
