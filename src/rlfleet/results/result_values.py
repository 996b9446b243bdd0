"""Result values made safe for the log files: JSON-able (`to_jsonable`), flattened to
"a/b/c" columns (`flatten_dict`), and which columns progress.csv and TensorBoard leave out.

Cheap to import (the CLI imports it at start-up): it imports neither NumPy nor torch at
module level; values of those types are recognised by duck typing.
"""
from __future__ import annotations

import functools
import os
import types
from typing import Any, Dict, Iterable, Mapping

from rlfleet.results.rllib2_keys import is_rllib2_copy

# Keys left out of progress.csv and TensorBoard: they are bulky (per-episode lists, the whole
# config) and already kept in full in result.json / params.json. Matched against every path
# segment, so "evaluation/hist_stats/..." is excluded too.
EXCLUDED_FROM_CSV = frozenset({"hist_stats", "config"})


def _qualified_name(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if qualname is None:
        return _safe_repr(obj)
    return f"{module}.{qualname}" if module else str(qualname)


def _safe_repr(obj: Any) -> str:
    try:
        return repr(obj)
    except Exception:  # a broken __repr__ must never break logging
        return f"<unrepresentable {type(obj).__module__}.{type(obj).__qualname__}>"


def _type_module(obj: Any) -> str:
    return getattr(type(obj), "__module__", "") or ""


def _is_gym_space(obj: Any) -> bool:
    # Checked by module name so that logging does not import gymnasium.
    for klass in type(obj).__mro__:
        mod = getattr(klass, "__module__", "") or ""
        if klass.__name__ == "Space" and (
            mod.startswith("gymnasium.spaces") or mod.startswith("gym.spaces")
        ):
            return True
    return False


_FUNCTION_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
)


def _key_to_str(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, type) or isinstance(key, _FUNCTION_TYPES):
        return _qualified_name(key)
    if key is None or isinstance(key, (bool, int, float)):
        return str(key)
    return _safe_repr(key)


def to_jsonable(obj: Any) -> Any:
    """Converts any value into something ``json.dumps`` accepts; never raises.

    Rules: dicts get string keys (recursively converted); lists, tuples and sets become
    lists; classes and functions become their qualified name ("module.QualName"); gym
    spaces their repr; NumPy scalars/arrays and torch tensors Python numbers/lists; paths
    strings; anything else its repr. Floats stay floats (NaN/inf are written as ``NaN`` /
    ``Infinity``, as Python's json does).

    Args:
        obj: any value, e.g. a trainer config or a result dict.

    Returns:
        A structure of dict/list/str/int/float/bool/None.
    """
    return _to_jsonable(obj, set())


def _to_jsonable(obj: Any, active: set) -> Any:
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    # Subclasses (numpy.float64, IntEnum, str enums) collapse to the plain builtin.
    # (str.__str__, not str(): str() of a (str, Enum) member gives "Cls.NAME", not its value.)
    for builtin, convert in ((bool, bool), (int, int), (float, float), (str, str.__str__)):
        if isinstance(obj, builtin):
            return convert(obj)
    if isinstance(obj, (Mapping, list, tuple, set, frozenset)):
        # `active` holds the containers on the current path, so a self-referencing config
        # prints a marker instead of recursing forever.
        if id(obj) in active:
            return "<cycle>"
        active.add(id(obj))
        try:
            if isinstance(obj, Mapping):
                return {_key_to_str(k): _to_jsonable(v, active) for k, v in obj.items()}
            items: Iterable[Any] = obj
            if isinstance(obj, (set, frozenset)):
                try:  # deterministic output for sets of comparable things
                    items = sorted(obj)
                except TypeError:
                    items = list(obj)
            return [_to_jsonable(v, active) for v in items]
        except Exception:  # e.g. a Mapping whose items() raises
            return _safe_repr(obj)
        finally:
            active.discard(id(obj))
    if isinstance(obj, type) or isinstance(obj, _FUNCTION_TYPES):
        return _qualified_name(obj)
    if isinstance(obj, functools.partial):
        return _safe_repr(obj)
    module = _type_module(obj)
    if module == "numpy" or module.startswith("numpy."):
        try:
            # .item() for scalars, .tolist() for arrays; both give Python builtins.
            if getattr(obj, "ndim", None) == 0 and hasattr(obj, "item"):
                return _to_jsonable(obj.item(), active)
            if hasattr(obj, "tolist"):
                return _to_jsonable(obj.tolist(), active)
        except Exception:
            pass
        return _safe_repr(obj)
    if module.startswith("torch") and hasattr(obj, "tolist"):
        try:
            return _to_jsonable(obj.detach().cpu().tolist(), active)
        except Exception:
            return _safe_repr(obj)
    if _is_gym_space(obj):
        return _safe_repr(obj)
    if isinstance(obj, os.PathLike):
        try:
            return os.fspath(obj)
        except Exception:
            return _safe_repr(obj)
    return _safe_repr(obj)


def flatten_dict(d: Mapping[str, Any], sep: str = "/") -> Dict[str, Any]:
    """Flattens nested mappings into one level, joining keys with ``sep``.

    ``{"info": {"learner": {"default_policy": {"policy_loss": 0.1}}}}`` becomes
    ``{"info/learner/default_policy/policy_loss": 0.1}``. Empty nested mappings produce no
    key; non-mapping values (lists included) are kept as they are.

    Args:
        d: the (nested) mapping.
        sep: separator placed between the key parts.

    Returns:
        A new flat dict, keys in depth-first insertion order.
    """
    out: Dict[str, Any] = {}

    def _walk(prefix: str, value: Mapping[str, Any]) -> None:
        for key, sub in value.items():
            full = f"{prefix}{sep}{key}" if prefix else str(key)
            if isinstance(sub, Mapping):
                _walk(full, sub)
            else:
                out[full] = sub

    _walk("", d)
    return out


def excluded_from_csv(flat_key: str, sep: str = "/") -> bool:
    """Whether progress.csv and TensorBoard leave the flattened key out: bulky values, and the
    RLlib 2.x copies of 1.x values (rllib2_keys.py), so each quantity is one column and one
    curve; result.json keeps both."""
    return any(part in EXCLUDED_FROM_CSV for part in flat_key.split(sep)) or is_rllib2_copy(flat_key, sep)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
