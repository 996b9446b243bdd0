"""Config values to JSON and back, for checkpoint manifests and export metadata.

Plain values stay as they are (tuples and sets become lists). Classes and functions are recorded by qualified name
(`{"__callable__": "pkg.module:Qual.Name"}`) and re-imported on decode; Gymnasium spaces
are recorded by their parameters (`{"__space__": {...}}`). A value that has neither form
(a lambda, a class defined in `__main__` or inside a function, an arbitrary object) is
recorded as `{"__unserializable__": repr}`: decoding it fails with the key's path, unless
the caller supplies a replacement.
"""
from __future__ import annotations

import importlib
import types
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np

CALLABLE, SPACE, UNSERIALIZABLE = "__callable__", "__space__", "__unserializable__"
_MARKERS = (CALLABLE, SPACE, UNSERIALIZABLE)


class DecodeError(ValueError):
    """A recorded value that cannot be rebuilt; `path` is its config key ("model.custom_model")."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


def qualified_name(obj: Any) -> Optional[str]:
    """`"module:qualname"` when importing it gives back `obj` itself, else None."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    try:
        found = _import_name(module, qualname)
    except Exception:
        return None
    return f"{module}:{qualname}" if found is obj else None


def _import_name(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# --- spaces ----------------------------------------------------------------------
def encode_space(space: Any) -> Dict[str, Any]:
    """A Gymnasium space as a JSON-able dict (Box, Discrete, MultiDiscrete, MultiBinary,
    Tuple, Dict); raises ValueError for others."""
    import gymnasium as gym

    s = gym.spaces
    if isinstance(space, s.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(),
                "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, s.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, s.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).tolist(),
                "start": np.asarray(space.start).tolist(), "dtype": str(space.dtype)}
    if isinstance(space, s.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, s.Tuple):
        return {"type": "Tuple", "spaces": [encode_space(x) for x in space.spaces]}
    if isinstance(space, s.Dict):
        return {"type": "Dict", "spaces": {k: encode_space(v) for k, v in space.spaces.items()}}
    raise ValueError(f"cannot record the space {space!r} as JSON")


def decode_space(d: Mapping[str, Any]) -> Any:
    import gymnasium as gym

    s = gym.spaces
    kind = d.get("type")
    if kind == "Box":
        dtype = np.dtype(d["dtype"])
        return s.Box(np.asarray(d["low"], dtype), np.asarray(d["high"], dtype), tuple(d["shape"]), dtype)
    if kind == "Discrete":
        return s.Discrete(int(d["n"]), start=int(d.get("start", 0)))
    if kind == "MultiDiscrete":
        return s.MultiDiscrete(np.asarray(d["nvec"]), dtype=np.dtype(d.get("dtype", "int64")),
                               start=np.asarray(d.get("start", 0)))
    if kind == "MultiBinary":
        return s.MultiBinary(d["n"])
    if kind == "Tuple":
        return s.Tuple([decode_space(x) for x in d["spaces"]])
    if kind == "Dict":
        return s.Dict({k: decode_space(v) for k, v in d["spaces"].items()})
    raise ValueError(f"unknown space type {kind!r}")


def _is_space(obj: Any) -> bool:
    try:
        import gymnasium as gym
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, gym.Space)


# --- encode ----------------------------------------------------------------------
def encode(value: Any) -> Any:
    """`value` as JSON-able data; never raises (see the module docstring for markers)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {UNSERIALIZABLE: _short_repr(value), "type": "a dict with non-string keys"}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (set, frozenset)):  # e.g. `multiagent.policies` as a set of ids
        return [encode(v) for v in sorted(value, key=repr)]
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        name = qualified_name(value)
        if name is not None:
            return {CALLABLE: name}
        qualname = getattr(value, "__qualname__", "")
        why = ("a lambda" if "<lambda>" in qualname else "defined inside a function" if "<locals>" in qualname
               else "defined in __main__" if getattr(value, "__module__", None) == "__main__"
               else "not importable by its qualified name")
        return {UNSERIALIZABLE: _short_repr(value), "type": f"{type(value).__name__} {why}"}
    elif _is_space(value):
        try:
            return {SPACE: encode_space(value)}
        except ValueError:
            pass
    return {UNSERIALIZABLE: _short_repr(value), "type": f"a {type(value).__module__}.{type(value).__qualname__}"}


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= 200 else text[:197] + "..."


# --- decode ----------------------------------------------------------------------
_MISSING = object()


def _is_marker(value: Any) -> bool:
    return isinstance(value, dict) and any(m in value for m in _MARKERS)


def import_callable(name: str, path: str) -> Any:
    """Imports `"module:qualname"` recorded at config key `path`.

    Only a class or function whose own `__module__` is the recorded module comes back
    (so a name cannot smuggle in e.g. `os:system`, whose home is `posix`).
    """
    module, _, qualname = str(name).partition(":")
    if not module or not qualname or module == "builtins":
        raise DecodeError(path, f"config key '{path}' records {name!r}, which is not a 'module:QualName' "
                                "of a class or function")
    try:
        obj = _import_name(module, qualname)
    except Exception as exc:
        raise DecodeError(path, f"config key '{path}': cannot re-import {name!r} "
                                f"({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, (type, types.FunctionType)) or obj.__module__ != module:
        raise DecodeError(path, f"config key '{path}' records {name!r}, which is not a class or function "
                                f"defined in {module!r}")
    return obj


def decode(value: Any, override: Any = _MISSING, path: str = "",
           importer: Callable[[str, str], Any] = import_callable) -> Any:
    """Rebuilds an `encode`d value; `override` (same nesting) replaces parts of it first.

    Raises:
        DecodeError: a recorded callable cannot be imported, or an unserializable value has
            no override; the error's `path` names the config key.
    """
    if override is not _MISSING and not (isinstance(override, Mapping) and isinstance(value, dict)
                                         and not _is_marker(value)):
        return override
    if isinstance(value, dict):
        if CALLABLE in value:
            return importer(value[CALLABLE], path)
        if SPACE in value:
            try:
                return decode_space(value[SPACE])
            except Exception as exc:
                raise DecodeError(path, f"config key '{path}': cannot rebuild the recorded space ({exc})") from None
        if UNSERIALIZABLE in value:
            raise DecodeError(path, f"config key '{path}' held {value[UNSERIALIZABLE]} ({value.get('type', 'a value')}"
                                    "), which a checkpoint cannot record")
        sub = override if isinstance(override, Mapping) else {}
        out = {k: decode(v, sub.get(k, _MISSING), f"{path}.{k}" if path else k, importer)
               for k, v in value.items()}
        for k, v in sub.items():
            if k not in out:
                out[k] = v
        return out
    if isinstance(value, list):
        return [decode(v, _MISSING, f"{path}[{i}]", importer) for i, v in enumerate(value)]
    return value


__all__ = ["encode", "decode", "DecodeError", "encode_space", "decode_space", "qualified_name", "import_callable"]
