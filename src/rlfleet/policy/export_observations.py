"""Raw env observations to the model's input, inside an exported graph: the preprocessor
(one-hot encodings, Tuple / Dict flattening) and the observation filter's frozen statistics.

| space (preprocessor)          | graph input(s)                    | in the graph                     |
| ----------------------------- | --------------------------------- | -------------------------------- |
| Box (NoPreprocessor)          | `obs` float32 (uint8 for images)  | nothing (the cast is the caller's) |
| Discrete                      | `obs` int64 `[B]`                 | one-hot `[B, n]`                 |
| MultiDiscrete                 | `obs` int64 `[B, *nvec.shape]`    | concatenated one-hots            |
| MultiBinary                   | `obs` float32 `[B, *shape]`       | nothing                          |
| Tuple / Dict                  | one input per leaf: `obs.0`, `obs.key`, ... (nested: `obs.key.0`) | each leaf as above, flattened and concatenated in the preprocessor's order |

The filter: `NoFilter` is the identity; a `MeanStdFilter` computes, in float64 as the filter
does, `clip((x - shift) / scale, -clip, clip)` cast to float32, with `shift` its running mean
(0 without `demean`) and `scale` its running std + 1e-8 (1 without `destd`): the same numbers
`Trainer.compute_single_action` feeds the model. `filter.json`, written beside every export
of a trainer's policy, holds those statistics:

    {"format": "rlfleet-observation-filter", "format_version": 1, "filter": "MeanStdFilter",
     "count": n, "shift": [...], "scale": [...], "clip": null or c, "in_graph": true / false}

For a bare model (`include_filter=False`) apply them to the preprocessed observation:

    f = json.load(open("export/filter.json"))
    obs = np.clip((obs - np.asarray(f["shift"])) / np.asarray(f["scale"]),
                  -(f["clip"] or np.inf), f["clip"] or np.inf).astype(np.float32)
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from gymnasium import spaces

from rlfleet.models.preprocessors import DictFlatteningPreprocessor, TupleFlatteningPreprocessor, _FloatNoPreprocessor
from rlfleet.models.space_preprocessors import MultiBinaryPreprocessor, NoPreprocessor, OneHotPreprocessor
from rlfleet.utils.filters import _STD_EPS, MeanStdFilter, NoFilter
from rlfleet.utils.safe_files import json_bytes, write_file_atomic

FILTER_FORMAT = "rlfleet-observation-filter"
FILTER_FILE = "filter.json"
# The built-in leaf preprocessors, by exact class: a subclass (a custom preprocessor) may
# transform otherwise, in NumPy code the graph cannot hold.
_LEAVES = (NoPreprocessor, _FloatNoPreprocessor, OneHotPreprocessor, MultiBinaryPreprocessor)


class _Leaf(torch.nn.Module):
    """One flat-space observation (Box, Discrete, MultiDiscrete, MultiBinary) as the
    preprocessor transforms it, `[B, *shape]`."""

    def __init__(self, preprocessor: Any, flat: bool):
        super().__init__()
        space = preprocessor.original_space
        self.shape = tuple(int(s) for s in preprocessor.shape)
        self.flat = flat  # inside a Tuple / Dict: flattened to [B, size], always float32
        self.one_hot = isinstance(preprocessor, OneHotPreprocessor)
        self.keep_uint8 = not flat and np.dtype(preprocessor.dtype) == np.uint8
        if self.one_hot:
            if isinstance(space, spaces.Discrete):
                offsets = -np.asarray([int(space.start)], np.int64)
            else:
                nvec = np.asarray(space.nvec, np.int64).reshape(-1)
                offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]]) - np.asarray(space.start, np.int64).reshape(-1)
            self.register_buffer("offsets", torch.as_tensor(offsets, dtype=torch.int64))
            self.register_buffer("positions", torch.arange(self.shape[0], dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.one_hot:
            index = x.to(torch.int64).reshape(x.shape[0], -1) + self.offsets  # [B, k]
            # One row of k ones: the sub-spaces' ranges do not overlap, so the sum is 0 / 1.
            out = (index.unsqueeze(-1) == self.positions).to(torch.float32).sum(1)
        elif self.keep_uint8:
            out = x
        else:
            out = x.to(torch.float32)
        return out.reshape(x.shape[0], -1) if self.flat else out


class ObservationInputs(torch.nn.Module):
    """`raw inputs (one per leaf) -> preprocessed observation`; `names` and `examples`
    (a 2-row zero batch per input) say what to feed it."""

    def __init__(self, preprocessor: Any):
        super().__init__()
        self.names: List[str] = []
        self.examples: List[torch.Tensor] = []
        self.leaves = torch.nn.ModuleList()
        self.nested = type(preprocessor) in (TupleFlatteningPreprocessor, DictFlatteningPreprocessor)
        self._add(preprocessor, "obs", flat=self.nested)

    def _add(self, pp: Any, name: str, flat: bool) -> None:
        if type(pp) in (TupleFlatteningPreprocessor, DictFlatteningPreprocessor):
            space = pp.original_space
            keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
            for key, child in zip(keys, pp._children):
                self._add(child, f"{name}.{key}", flat=True)
            return
        if type(pp) not in _LEAVES:
            raise ValueError(
                f"export: the observation preprocessor {type(pp).__name__} (model.custom_preprocessor) runs NumPy "
                "code that cannot become part of an exported graph; export the bare model with include_filter=False "
                "(it takes preprocessed observations; filter.json beside it holds the filter's statistics), or "
                "transform observations with a gymnasium.ObservationWrapper instead of a custom preprocessor")
        space = pp.original_space
        if isinstance(pp, OneHotPreprocessor):
            shape, dtype = (() if isinstance(space, spaces.Discrete) else tuple(space.nvec.shape)), torch.int64
        else:
            shape = tuple(space.shape)
            dtype = torch.uint8 if not flat and np.dtype(pp.dtype) == np.uint8 else torch.float32
        self.names.append(name)
        self.examples.append(torch.zeros((2, *shape), dtype=dtype))
        self.leaves.append(_Leaf(pp, flat))

    def forward(self, *raw: torch.Tensor) -> torch.Tensor:
        parts = [leaf(x) for leaf, x in zip(self.leaves, raw)]
        return torch.cat(parts, dim=1) if self.nested else parts[0]

    def describe(self) -> Dict[str, Dict[str, Any]]:
        """`model.json`'s entry per input: shape (None: the batch), dtype, meaning."""
        return {name: {"shape": [None, *map(int, ex.shape[1:])], "dtype": str(ex.dtype).replace("torch.", ""),
                       "meaning": "raw env observations" if len(self.names) == 1 else
                       "raw env observations, this leaf of the Tuple / Dict space"}
                for name, ex in zip(self.names, self.examples)}


class FrozenMeanStd(torch.nn.Module):
    """A MeanStdFilter's statistics, frozen: `clip((x - shift) / scale)` in float64, then
    float32 (the filter's own arithmetic, so the outputs match it bit for bit)."""

    def __init__(self, shift: np.ndarray, scale: np.ndarray, clip: Optional[float]):
        super().__init__()
        self.register_buffer("shift", torch.as_tensor(np.asarray(shift, np.float64)))
        self.register_buffer("scale", torch.as_tensor(np.asarray(scale, np.float64)))
        self.clip = float(clip) if clip else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = (x.to(torch.float64) - self.shift) / self.scale
        if self.clip is not None:
            y = torch.clamp(y, -self.clip, self.clip)
        return y.to(torch.float32)


def filter_statistics(observation_filter: Any) -> Dict[str, Any]:
    """`filter.json`'s content for `observation_filter` (NoFilter: shift 0, scale 1)."""
    # By exact class: a subclass may filter otherwise, and its statistics would lie.
    if type(observation_filter) is MeanStdFilter:
        stat = observation_filter.rs
        shift = stat.mean if observation_filter.demean else np.zeros(stat.shape)
        scale = stat.std + _STD_EPS if observation_filter.destd else np.ones(stat.shape)
        return {"filter": "MeanStdFilter", "count": int(stat.n), "shift": np.asarray(shift, np.float64).tolist(),
                "scale": np.asarray(scale, np.float64).tolist(),
                "clip": float(observation_filter.clip) if observation_filter.clip else None}
    if observation_filter is None or type(observation_filter) is NoFilter:
        return {"filter": "NoFilter", "count": 0, "shift": 0.0, "scale": 1.0, "clip": None}
    raise ValueError(
        f"export: the observation filter {type(observation_filter).__qualname__} is not one rlfleet can freeze "
        "into an export (MeanStdFilter and NoFilter are); use observation_filter='MeanStdFilter' or 'NoFilter', "
        "or export the policy's model alone with policy.export_model(dir) and apply your filter yourself")


def frozen_filter(observation_filter: Any) -> Optional[torch.nn.Module]:
    """The graph module applying `observation_filter`'s current statistics (None: identity)."""
    stats = filter_statistics(observation_filter)
    if stats["filter"] == "NoFilter":
        return None
    return FrozenMeanStd(np.asarray(stats["shift"]), np.asarray(stats["scale"]), stats["clip"])


def write_filter_json(observation_filter: Any, export_dir: str, in_graph: bool) -> str:
    """Writes `export_dir/filter.json` (see the module docstring); returns its path."""
    from rlfleet.utils.versions import software_versions

    stats = filter_statistics(observation_filter)
    record = {"format": FILTER_FORMAT, "format_version": 1, "rlfleet_version": software_versions()["rlfleet"],
              **stats, "in_graph": bool(in_graph),
              "apply": "to the preprocessed observation x: clip((x - shift) / scale, -clip, clip) in float64, then "
                       "float32 (no clip when clip is null); in_graph: the exported model already does it"}
    path = os.path.join(export_dir, FILTER_FILE)
    write_file_atomic(path, json_bytes(record))
    return path


class RawObservations(torch.nn.Module):
    """`raw inputs -> the model's input`: the preprocessor, then the frozen filter."""

    def __init__(self, preprocessor: Any, observation_filter: Any):
        super().__init__()
        self.inputs = ObservationInputs(preprocessor)
        self.filter = frozen_filter(observation_filter)

    def forward(self, *raw: torch.Tensor) -> torch.Tensor:
        obs = self.inputs(*raw)
        return obs if self.filter is None else self.filter(obs)


def model_input_spec(observation_space: Any, filtered: bool) -> Tuple[List[str], List[torch.Tensor], Dict[str, Any]]:
    """The bare model's one input `obs` (preprocessed, filtered): names, examples, description.
    uint8 images stay uint8 unless a filter (`filtered`) turned them into floats."""
    dtype = torch.uint8 if np.dtype(observation_space.dtype) == np.uint8 and not filtered else torch.float32
    example = torch.zeros((2, *observation_space.shape), dtype=dtype)
    return ["obs"], [example], {"obs": {"shape": [None, *map(int, observation_space.shape)],
                                        "dtype": str(dtype).replace("torch.", ""),
                                        "meaning": "preprocessed, filtered observations (see filter.json)"}}


__all__ = ["FILTER_FILE", "FILTER_FORMAT", "FrozenMeanStd", "ObservationInputs", "RawObservations",
           "filter_statistics", "model_input_spec", "write_filter_json"]
