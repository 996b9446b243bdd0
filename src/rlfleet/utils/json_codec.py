"""Config values to JSON and back, for checkpoint manifests and export metadata.

Plain values stay as they are (tuples and sets become lists). Classes and functions are recorded by qualified name
(`{"__callable__": "pkg.module:Qual.Name"}`) and re-imported on decode; Gymnasium spaces
are recorded by their parameters (`{"__space__": {...}}`). A value that has neither form
(a lambda, a class defined in `__main__` or inside a function, an arbitrary object) is
recorded as `{"__unserializable__": repr}`: decoding it fails with the key's path, unless
the caller supplies a replacement.

Importing a module runs its code, so a recorded name is imported only from a module the
process trusts (`ImportTrust`): rlfleet and gymnasium, modules named by the caller
(`trusted_modules`), and modules of the user's own code that are already imported (no code
runs for those). `find_untrusted` lists, before anything is imported, every recorded name
that falls outside that rule.
"""
from __future__ import annotations

import importlib
import os
import site
import sys
import sysconfig
import types
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

CALLABLE, SPACE, UNSERIALIZABLE = "__callable__", "__space__", "__unserializable__"
_MARKERS = (CALLABLE, SPACE, UNSERIALIZABLE)


class DecodeError(ValueError):
    """A recorded value that cannot be rebuilt; `path` is its config key ("model.custom_model")."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


class UntrustedImportError(DecodeError):
    """A recorded name whose module is not trusted (`ImportTrust`); nothing was imported."""

    def __init__(self, path: str, name: str, module: str):
        super().__init__(path, f"config key '{path}' records {name!r}, from module {module!r}, which is not "
                               "trusted: it was not imported (importing a module runs its code)")
        self.name = name
        self.module = module


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


# --- trust: which modules a recorded name may be imported from -------------------
ALWAYS_TRUSTED = ("rlfleet", "gymnasium")


def _within(module: str, packages: Iterable[str]) -> bool:
    """Whether `module` is one of `packages` or inside one (a dot boundary: "rlfleet_x" is
    not inside "rlfleet")."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def _installed_roots() -> Tuple[str, ...]:
    """Folders of the Python installation: the standard library and site-packages."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # pragma: no cover - some embedded interpreters lack these
        pass
    return tuple(sorted(os.path.realpath(r) for r in roots if r))


def is_imported_user_module(module: str) -> bool:
    """Whether `module` is already imported (so resolving a name in it runs no code) and is
    the user's own code: not the standard library, not an installed package (those take an
    explicit trust: a function of any installed library could be named)."""
    mod = sys.modules.get(module)
    if mod is None or module == "__main__":
        return False
    top = module.split(".")[0]
    if top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names:
        return False
    file = getattr(mod, "__file__", None)
    if not file:  # a namespace package or a module built in memory by the user's code
        return True
    real = os.path.realpath(file)
    return not any(real == r or real.startswith(r + os.sep) for r in _installed_roots())


class ImportTrust:
    """Which modules recorded names (checkpoints, exported metadata) may be imported from.

    Trusted: rlfleet and gymnasium (with their sub-modules), the modules (packages) named
    in `trusted_modules`, and modules of the user's own code that are already imported
    (`is_imported_user_module`). Anything else is never imported.

    Args:
        trusted_modules: module or package names to trust in addition, e.g. `["mypkg"]`
            (trusts `mypkg` and `mypkg.*`, not `mypkg_other`).
        where: how the caller names the argument in error messages.
    """

    def __init__(self, trusted_modules: Optional[Iterable[str]] = None, *, where: str = "trusted_modules"):
        if trusted_modules is None:
            names: Sequence[Any] = ()
        elif isinstance(trusted_modules, str):
            names = (trusted_modules,)
        else:
            try:
                names = tuple(trusted_modules)
            except TypeError:
                raise ValueError(f"{where}: expected a list of module names, e.g. ['mypkg'], got "
                                 f"{trusted_modules!r}") from None
        for name in names:
            if not isinstance(name, str) or not name or not all(p.isidentifier() for p in name.split(".")):
                raise ValueError(f"{where}: {name!r} is not a module name (dotted Python identifiers, e.g. "
                                 "'mypkg' or 'mypkg.envs')")
        self.trusted_modules: Tuple[str, ...] = tuple(names)

    def allows(self, module: str) -> bool:
        """Whether a name recorded in `module` may be imported."""
        if not isinstance(module, str) or not module or module == "builtins":
            return False
        return _within(module, ALWAYS_TRUSTED + self.trusted_modules) or is_imported_user_module(module)

    def importer(self) -> Callable[[str, str], Any]:
        """An `importer` for `decode` that imports only from trusted modules."""

        def guarded(name: str, path: str) -> Any:
            module = str(name).partition(":")[0]
            if not self.allows(module):
                raise UntrustedImportError(path, str(name), module)
            return import_callable(name, path)

        return guarded

    def __repr__(self) -> str:
        return f"ImportTrust(trusted_modules={list(self.trusted_modules)})"


class Untrusted(NamedTuple):
    """A recorded name `find_untrusted` refused: its config key path, the name, its module."""

    path: str
    name: str
    module: str


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
    # The module imported by the recorded name must be the object's own: a moved module's old
    # path imports the module itself (rlfleet/module_aliases.py), `os` is not `posix`.
    if not isinstance(obj, (type, types.FunctionType)) or obj.__module__ != sys.modules[module].__name__:
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


def find_untrusted(value: Any, trust: ImportTrust, override: Any = _MISSING,
                   string_module: Optional[Callable[[Tuple[str, ...], str], Optional[str]]] = None
                   ) -> List[Untrusted]:
    """Every name in the `encode`d `value` that `decode(value, override)` would import from
    a module `trust` does not allow; imports nothing.

    Args:
        value: the recorded (encoded) tree.
        trust: the trust rule.
        override: as for `decode`: overridden parts are the caller's own and not checked.
        string_module: `(keys, text) -> module` for plain strings that a consumer of the
            decoded value imports by name (e.g. `env: "pkg.mod:Env"`); None: not imported.
    """
    found: List[Untrusted] = []

    def walk(v: Any, ov: Any, keys: Tuple[str, ...], path: str) -> None:
        if ov is not _MISSING and not (isinstance(ov, Mapping) and isinstance(v, dict) and not _is_marker(v)):
            return
        if isinstance(v, dict):
            if CALLABLE in v:
                name = str(v[CALLABLE])
                module = name.partition(":")[0]
                if not trust.allows(module):
                    found.append(Untrusted(path, name, module))
                return
            if _is_marker(v):
                return
            sub = ov if isinstance(ov, Mapping) else {}
            for k, x in v.items():
                walk(x, sub.get(k, _MISSING), keys + (k,), f"{path}.{k}" if path else k)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, _MISSING, keys + (str(i),), f"{path}[{i}]")
        elif isinstance(v, str) and string_module is not None:
            module = string_module(keys, v)
            if module is not None and not trust.allows(module):
                found.append(Untrusted(path, v, module))

    walk(value, override, (), "")
    return found


__all__ = ["encode", "decode", "DecodeError", "encode_space", "decode_space", "qualified_name", "import_callable",
           "ImportTrust", "UntrustedImportError", "Untrusted", "find_untrusted", "is_imported_user_module",
           "ALWAYS_TRUSTED"]
