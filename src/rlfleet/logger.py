"""Per-run result logging: the results folder, ``params.json``, ``result.json``,
``progress.csv`` and (when the ``tensorboard`` package is installed) TensorBoard events.

These are the files users open after a run, so they are written line by line and flushed
after every result: a crash or Ctrl-C never loses a finished iteration.

This module must stay cheap to import (the CLI imports it at start-up): it imports neither
NumPy nor torch at module level; values of those types are recognised by duck typing.
"""
from __future__ import annotations

import csv
import datetime
import functools
import json
import logging
import os
import re
import secrets
import types
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

logger = logging.getLogger(__name__)

RESULTS_DIR_ENV = "RLFLEET_RESULTS_DIR"

# Keys left out of progress.csv and TensorBoard: they are bulky (per-episode lists, the whole
# config) and already kept in full in result.json / params.json. Matched against every path
# segment, so "evaluation/hist_stats/..." is excluded too.
EXCLUDED_FROM_CSV = frozenset({"hist_stats", "config"})

_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
# Keep folder names well under common 255-byte file-name limits.
_MAX_NAME_PART = 80


# --------------------------------------------------------------------------------------
# Results folder
# --------------------------------------------------------------------------------------
def default_results_dir() -> str:
    """Where run folders go when no directory is given.

    Returns:
        ``$RLFLEET_RESULTS_DIR`` if set (``~`` expanded), else ``~/rlfleet_results``.
    """
    env_dir = os.environ.get(RESULTS_DIR_ENV)
    if env_dir:
        return os.path.expanduser(env_dir)
    return os.path.join(os.path.expanduser("~"), "rlfleet_results")


def sys_usage() -> Dict[str, float]:
    """CPU and memory use of this machine in percent, for a result's `perf` (`log_sys_usage`);
    empty without psutil (optional)."""
    try:
        import psutil
    except ImportError:
        return {}
    return {"cpu_util_percent": psutil.cpu_percent(), "ram_util_percent": psutil.virtual_memory().percent}


def _sanitize(name: str) -> str:
    """Makes one folder-name part safe on every filesystem ("ALE/Pong-v5" -> "ALE_Pong-v5")."""
    cleaned = _UNSAFE_PATH_CHARS.sub("_", name).strip("._")
    return cleaned[:_MAX_NAME_PART] or "unnamed"


def make_logdir(algo: str, env_id: Optional[str], results_dir: Optional[str] = None) -> str:
    """Creates a new, unique run folder.

    The name is ``<Algo>_<env>_<YYYY-MM-DD_HH-MM-SS>_<random>`` (the env part is left out
    when ``env_id`` is None). The random suffix makes two runs started in the same second,
    even from different processes, land in different folders.

    Args:
        algo: algorithm name, e.g. "PPO".
        env_id: environment id, e.g. "CartPole-v1" or "ALE/Pong-v5"; None for no env part.
        results_dir: parent folder; defaults to :func:`default_results_dir`. Created if
            missing.

    Returns:
        The absolute path of the new (empty) folder.
    """
    parent = os.path.abspath(os.path.expanduser(results_dir or default_results_dir()))
    os.makedirs(parent, exist_ok=True)
    parts = [_sanitize(str(algo))]
    if env_id is not None:
        parts.append(_sanitize(str(env_id)))
    parts.append(datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    prefix = "_".join(parts)
    # os.makedirs(exist_ok=False) is atomic: on the (tiny) chance of a suffix collision we
    # simply draw again instead of sharing a folder with another run.
    for _ in range(100):
        path = os.path.join(parent, f"{prefix}_{secrets.token_hex(3)}")
        try:
            os.makedirs(path)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"Could not create a unique run folder under {parent!r}")


# --------------------------------------------------------------------------------------
# JSON-safe conversion and flattening
# --------------------------------------------------------------------------------------
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


def _excluded(flat_key: str, sep: str = "/") -> bool:
    return any(part in EXCLUDED_FROM_CSV for part in flat_key.split(sep))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------
# TensorBoard (optional)
# --------------------------------------------------------------------------------------
_TB_UNAVAILABLE_LOGGED = False


def _make_tb_writer(logdir: str) -> Optional[Any]:
    """Returns a ``SummaryWriter`` for ``logdir``, or None when tensorboard is missing."""
    global _TB_UNAVAILABLE_LOGGED
    try:
        # torch.utils.tensorboard needs the separate `tensorboard` package; import lazily so
        # that neither torch nor tensorboard loads with this module.
        from torch.utils.tensorboard import SummaryWriter
    except Exception as exc:  # ImportError, or a broken tensorboard/protobuf install
        if not _TB_UNAVAILABLE_LOGGED:
            _TB_UNAVAILABLE_LOGGED = True
            logger.debug("TensorBoard logging disabled (%s: %s)", type(exc).__name__, exc)
        return None
    return SummaryWriter(log_dir=logdir)


# --------------------------------------------------------------------------------------
# UnifiedLogger
# --------------------------------------------------------------------------------------
class UnifiedLogger:
    """Writes one run's results folder: params.json, result.json, progress.csv, TB events.

    Args:
        config: the run's config, written once to ``params.json`` (made JSON-safe with
            :func:`to_jsonable`).
        logdir: the run folder (created if missing). If it already holds a
            ``progress.csv`` (a run resumed into its old folder), new rows are appended
            under the existing header.
    """

    def __init__(self, config: Mapping[str, Any], logdir: str):
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)
        with open(os.path.join(logdir, "params.json"), "w", encoding="utf-8") as f:
            json.dump(to_jsonable(config), f, indent=2, sort_keys=True)
            f.write("\n")

        self._json_file = open(os.path.join(logdir, "result.json"), "a", encoding="utf-8")
        csv_path = os.path.join(logdir, "progress.csv")
        self._csv_header: Optional[List[str]] = self._existing_csv_header(csv_path)
        self._csv_file = open(csv_path, "a", encoding="utf-8", newline="")
        self._csv_writer: Optional[csv.DictWriter] = None
        if self._csv_header is not None:
            self._csv_writer = self._new_csv_writer(self._csv_header)
        self._tb = _make_tb_writer(logdir)
        self._closed = False

    @staticmethod
    def _existing_csv_header(path: str) -> Optional[List[str]]:
        try:
            with open(path, encoding="utf-8", newline="") as f:
                header = next(csv.reader(f), None)
        except (OSError, csv.Error):
            return None
        return header or None

    def _new_csv_writer(self, header: List[str]) -> csv.DictWriter:
        # The header is fixed by the first result: keys that show up later (e.g. evaluation
        # metrics) are dropped, missing ones left empty, so every row lines up.
        return csv.DictWriter(
            self._csv_file, fieldnames=header, restval="", extrasaction="ignore"
        )

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Appends one result to result.json and progress.csv (and TensorBoard).

        Args:
            result: a result dict as returned by ``Trainer.train()``.
        """
        if self._closed:
            raise RuntimeError(f"UnifiedLogger for {self.logdir!r} is already closed")
        safe = to_jsonable(result)
        if not isinstance(safe, dict):
            safe = {"value": safe}

        self._json_file.write(json.dumps(safe, sort_keys=True) + "\n")
        self._json_file.flush()

        flat = {k: v for k, v in flatten_dict(safe).items() if not _excluded(k)}
        if self._csv_writer is None:
            self._csv_header = list(flat)
            self._csv_writer = self._new_csv_writer(self._csv_header)
            self._csv_writer.writeheader()
        row = {
            # Lists would otherwise be written with Python's repr; JSON reads back anywhere.
            k: json.dumps(v) if isinstance(v, list) else ("" if v is None else v)
            for k, v in flat.items()
        }
        self._csv_writer.writerow(row)
        self._csv_file.flush()

        if self._tb is not None:
            step = safe.get("timesteps_total")
            if not _is_number(step):
                step = safe.get("training_iteration")
            step = int(step) if _is_number(step) else None
            for key, value in flat.items():
                if _is_number(value):
                    self._tb.add_scalar(key, value, global_step=step)
            self._tb.flush()

    def flush(self) -> None:
        """Flushes all open files (on_result already flushes after every line)."""
        if self._closed:
            return
        self._json_file.flush()
        self._csv_file.flush()
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Flushes and closes all files; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        for closer in self._closers():
            try:
                closer()
            except Exception:  # close everything even if one fails
                logger.exception("Error while closing a log file in %s", self.logdir)

    def _closers(self) -> List[Callable[[], None]]:
        closers: List[Callable[[], None]] = [self._json_file.close, self._csv_file.close]
        if self._tb is not None:
            closers.append(self._tb.close)
        return closers

    def __enter__(self) -> "UnifiedLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
