"""Per-run result logging: the results folder, ``params.json``, ``result.json``,
``progress.csv`` and TensorBoard event files (tensorboardX), and `log_sys_usage`'s numbers.

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
import math
import logging
import os
import re
import secrets
import socket
import struct
import time
import types
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

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
    """This machine's CPU and memory use in percent, and each visible GPU's memory (and
    load, with NVML) once this process uses CUDA, for a result's `perf` (`log_sys_usage`).

    `cpu_util_percent` is the CPU use since the previous call (0.0 on the first).
    """
    import psutil

    usage = {"cpu_util_percent": float(psutil.cpu_percent()),
             "ram_util_percent": float(psutil.virtual_memory().percent)}
    usage.update(_gpu_usage())
    return usage


def _gpu_usage() -> Dict[str, float]:
    import sys

    torch = sys.modules.get("torch")  # never import torch just for this
    if torch is None:
        return {}
    try:
        # Only once this process uses CUDA: a context made just for these numbers costs
        # hundreds of MB of GPU memory.
        if not torch.cuda.is_initialized():
            return {}
        out: Dict[str, float] = {}
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            out[f"vram_util_percent{i}"] = 100.0 * (total - free) / total
            try:  # needs NVML (the nvidia-ml-py package)
                out[f"gpu_util_percent{i}"] = float(torch.cuda.utilization(i))
            except Exception:
                pass
        return out
    except Exception:  # a broken driver must not break training
        return {}


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
# Loggers: one per file format; UnifiedLogger runs several over one results folder
# --------------------------------------------------------------------------------------
class Logger:
    """One kind of result log in a results folder (the reference's Tune `Logger` interface).

    A `logger_config: {"type": MyLogger, **options}` logger is built as
    `MyLogger(options, logdir)` and gets every result; Tune's own `Logger` subclasses fit.

    Args:
        config: the logger's options (`logger_config` without `type`).
        logdir: the results folder (created if missing).
    """

    def __init__(self, config: Mapping[str, Any], logdir: str):
        self.config = config
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Logs one result dict (as returned by `Trainer.train()`)."""
        raise NotImplementedError  # abstract: each logger writes its own format

    def flush(self) -> None:
        """Writes out anything buffered."""

    def close(self) -> None:
        """Releases the files; called once at the end of the run."""


class JsonLogger(Logger):
    """`result.json`: one JSON line per result, everything kept (flushed after each line)."""

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        self._file = open(os.path.join(logdir, "result.json"), "a", encoding="utf-8")

    def on_result(self, result: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(_jsonable_dict(result), sort_keys=True) + "\n")
        self._file.flush()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class CSVLogger(Logger):
    """`progress.csv`: one row per result, flattened with "/" (bulky keys left out).

    The header is fixed by the first result: keys that show up later (e.g. evaluation
    metrics) are dropped, missing ones left empty, so every row lines up. A folder that
    already holds a `progress.csv` (a resumed run) gets new rows under its old header.
    """

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        path = os.path.join(logdir, "progress.csv")
        self._header: Optional[List[str]] = self._existing_header(path)
        self._file = open(path, "a", encoding="utf-8", newline="")
        self._writer: Optional[csv.DictWriter] = None
        if self._header is not None:
            self._writer = self._new_writer(self._header)

    @staticmethod
    def _existing_header(path: str) -> Optional[List[str]]:
        try:
            with open(path, encoding="utf-8", newline="") as f:
                header = next(csv.reader(f), None)
        except (OSError, csv.Error):
            return None
        return header or None

    def _new_writer(self, header: List[str]) -> csv.DictWriter:
        return csv.DictWriter(self._file, fieldnames=header, restval="", extrasaction="ignore")

    def on_result(self, result: Mapping[str, Any]) -> None:
        flat = _flat_logged(result)
        if self._writer is None:
            self._header = list(flat)
            self._writer = self._new_writer(self._header)
            self._writer.writeheader()
        # Lists would otherwise be written with Python's repr; JSON reads back anywhere.
        self._writer.writerow({k: json.dumps(v) if isinstance(v, list) else ("" if v is None else v)
                               for k, v in flat.items()})
        self._file.flush()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class _EventFile:
    """A TensorBoard event file (TFRecord framing of `Event` protos), written synchronously.

    tensorboardX's `SummaryWriter` queues every scalar through a `multiprocessing.Queue` to a
    writer thread and fsyncs on each flush: about 10 ms per result, a quarter of a small PPO
    iteration. Here a result is one `Event` holding all its scalars, appended and flushed to
    the OS (visible to TensorBoard at once); fsync happens only on close.
    """

    def __init__(self, logdir: str):
        # Lazily: tensorboardX pulls protobuf in; the CLI imports this module at start-up.
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import masked_crc32c

        self._event_pb2, self._summary_pb2, self._crc = event_pb2, summary_pb2, masked_crc32c
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(3)}"
        self._file = open(os.path.join(logdir, name), "ab")
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self._file.flush()

    def _write(self, event: Any) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", self._crc(header)) + data + struct.pack("<I", self._crc(data)))

    def write_scalars(self, scalars: Mapping[str, float], step: Optional[int]) -> None:
        values = [self._summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in scalars.items()]
        event = self._event_pb2.Event(wall_time=time.time(), summary=self._summary_pb2.Summary(value=values))
        if step is not None:
            event.step = step
        self._write(event)
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def _open_event_file(logdir: str) -> Optional[_EventFile]:
    """An `_EventFile` in `logdir` (None if tensorboardX cannot load)."""
    try:
        return _EventFile(logdir)
    except ImportError as exc:  # tensorboardX missing, or a broken protobuf install
        logger.warning("TensorBoard logging disabled: tensorboardX cannot be imported (%s: %s); "
                       "pip install tensorboardX", type(exc).__name__, exc)
        return None


class TBXLogger(Logger):
    """TensorBoard event files (`events.out.tfevents.*`, tensorboardX's protobuf messages):
    every numeric result key as a scalar at step `timesteps_total` (or `training_iteration`)."""

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        self._events = _open_event_file(logdir)

    def on_result(self, result: Mapping[str, Any]) -> None:
        if self._events is None:
            return
        step = result.get("timesteps_total")
        if not _is_number(step):
            step = result.get("training_iteration")
        step = int(step) if _is_number(step) else None
        # NaN (e.g. the mean reward before any episode ended) is left out: TensorBoard would
        # draw nothing for it.
        scalars = {key: float(value) for key, value in _flat_logged(result).items()
                   if _is_number(value) and math.isfinite(value)}
        self._events.write_scalars(scalars, step)

    def close(self) -> None:
        if self._events is not None:
            self._events.close()


DEFAULT_LOGGERS = (JsonLogger, CSVLogger, TBXLogger)
_BUILT_IN = {cls.__name__: cls for cls in DEFAULT_LOGGERS}


def _jsonable_dict(result: Mapping[str, Any]) -> Dict[str, Any]:
    safe = to_jsonable(result)
    return safe if isinstance(safe, dict) else {"value": safe}


def _flat_logged(result: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in flatten_dict(_jsonable_dict(result)).items() if not _excluded(k)}


def _resolve_logger_class(spec: Any) -> type:
    if isinstance(spec, str):
        if spec in _BUILT_IN:
            return _BUILT_IN[spec]
        import importlib

        module, _, name = spec.replace(":", ".").rpartition(".")
        try:
            spec = getattr(importlib.import_module(module), name) if module else None
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"'logger_config.type': cannot import {spec!r} ({exc}); give a logger class, its "
                             f"path 'package.module.Class', or one of {sorted(_BUILT_IN)}") from None
    if not isinstance(spec, type):
        raise ValueError(f"'logger_config.type': {spec!r} is not a class; give a logger class (with "
                         f"on_result(result) and close()), its path 'package.module.Class', or one of "
                         f"{sorted(_BUILT_IN)}")
    return spec


def logger_types(config: Mapping[str, Any]) -> List[type]:
    """The logger classes `config["logger_config"]["type"]` names (a class, a
    "package.module.Class" path, a built-in name such as "CSVLogger", or a list of those);
    empty when it names none.

    Raises:
        ValueError: naming `logger_config.type` when one cannot be imported or is not a class.
    """
    options = config.get("logger_config") or {}
    spec = options.get("type") if isinstance(options, Mapping) else None
    if spec is None:
        return []
    return [_resolve_logger_class(s) for s in (spec if isinstance(spec, (list, tuple)) else [spec])]


# --------------------------------------------------------------------------------------
# UnifiedLogger
# --------------------------------------------------------------------------------------
class UnifiedLogger:
    """Writes one run's results folder: params.json, then each result to several loggers.

    By default those are result.json (`JsonLogger`), progress.csv (`CSVLogger`) and
    TensorBoard events (`TBXLogger`). `config["logger_config"]` replaces them as in the
    reference: `{"type": MyLogger or [A, B, ...], **options}` builds `cls(options, logdir)`
    for each (`options` without `type`; an option `logdir` moves them to another folder).

    Args:
        config: the run's config, written once to ``params.json`` (made JSON-safe with
            :func:`to_jsonable`).
        logdir: the run folder (created if missing). If it already holds a
            ``progress.csv`` (a run resumed into its old folder), new rows are appended
            under the existing header.
        loggers: logger classes to use instead of `logger_config.type` / the defaults.
        write_params: False to leave params.json out (Tune writes its own).
    """

    def __init__(self, config: Mapping[str, Any], logdir: str, loggers: Optional[Sequence[type]] = None,
                 write_params: bool = True):
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)
        if write_params:
            with open(os.path.join(logdir, "params.json"), "w", encoding="utf-8") as f:
                json.dump(to_jsonable(config), f, indent=2, sort_keys=True)
                f.write("\n")
        options = dict(config.get("logger_config") or {}) if isinstance(config, Mapping) else {}
        options.pop("type", None)
        where = os.path.expanduser(options.pop("logdir", None) or logdir)
        classes = list(loggers) if loggers is not None else (logger_types(config) or list(DEFAULT_LOGGERS))
        self.loggers: List[Any] = []
        try:
            for cls in classes:
                self.loggers.append(cls(options, where))
        except BaseException:
            self._close_all()
            raise
        self._closed = False

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Passes one result to every logger.

        Args:
            result: a result dict as returned by ``Trainer.train()``.
        """
        if self._closed:
            raise RuntimeError(f"UnifiedLogger for {self.logdir!r} is already closed")
        for log in self.loggers:
            log.on_result(result)

    def flush(self) -> None:
        """Flushes every logger (the built-in ones already flush after every result)."""
        if self._closed:
            return
        for log in self.loggers:
            if hasattr(log, "flush"):
                log.flush()

    def close(self) -> None:
        """Flushes and closes every logger; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._close_all()

    def _close_all(self) -> None:
        for log in self.loggers:
            try:
                log.close()
            except Exception:  # close everything even if one fails
                logger.exception("Error while closing logger %r in %s", log, self.logdir)

    def __enter__(self) -> "UnifiedLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
