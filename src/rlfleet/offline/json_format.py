"""The offline data format: one JSON object per line, one batch per line. No pickle.

A single-agent line::

    {"type": "SampleBatch", "count": N, "actions_normalized": true,
     "columns": {"obs": COLUMN, "actions": COLUMN, ...}}

A multi-agent line (one per `MultiAgentBatch`; `count` is its env steps)::

    {"type": "MultiAgentBatch", "count": N, "actions_normalized": true,
     "policy_batches": {"<policy id>": {"count": n, "columns": {...}}, ...}}

A COLUMN is one of:

- a plain JSON list, one entry per row (nested lists for row shapes); its dtype is
  inferred (bool, int64, float32): what a hand-written file uses;
- ``{"dtype": "float32", "data": [...]}``: the same list with its NumPy dtype (what the
  writer writes for columns it does not compress; floats round-trip exactly);
- ``{"dtype": "float32", "shape": [N, 4], "codec": "lz4", "data": "<base64>"}``: the
  column's raw C-order bytes, LZ4-compressed (`lz4.block`, size stored) and base64-encoded
  (the columns of `output_compress_columns`).
- ``{"dtype": "json", "data": [{...}, ...]}``: one JSON value per row, read back as a 1-D
  object array: the `infos` column (each step's info dict). Values are written as JSON
  holds them: NumPy scalars as numbers, NumPy arrays and tuples as lists (read back as
  lists). An info entry JSON cannot hold (an arbitrary object, bytes, a dict with
  non-string keys) is dropped from every row, with one warning per key naming it: a
  writer on the sampling path must not stop a training run for a debugging field. Any
  other non-numeric column is not written (one warning naming it). `infos` is written
  uncompressed even when `output_compress_columns` names it.

``actions_normalized`` (optional) says whether `actions` are in the policy's normalized
space (what rlfleet's samplers record: `normalize_actions`); files without it follow the
`actions_in_input_normalized` config key. Decoding parses JSON and NumPy raw buffers only:
nothing in a file is ever executed or unpickled.
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any, Dict, Iterable, Optional, Set, Union

import lz4.block
import numpy as np

from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.utils.compression import decompress_columns

logger = logging.getLogger(__name__)

# NumPy dtype kinds a column may have: bool, signed / unsigned int, float.
_KINDS = "biuf"
CODECS = ("lz4",)
JSON_DTYPE = "json"  # a column of JSON values (`infos`), one per row
_warned: Set[str] = set()  # info keys and columns already warned about (warn once per process)


class OfflineDataError(ValueError):
    """A bad offline file: names the file, the line (1-based) and the problem."""

    def __init__(self, path: str, line: Optional[int], problem: str):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"offline data {where}: {problem}")
        self.path, self.line, self.problem = path, line, problem


# --- encoding -------------------------------------------------------------------------
class _NotJSON(TypeError):
    pass


def _jsonable(value: Any) -> Any:
    """`value` as plain JSON types (NumPy scalars -> numbers, arrays / tuples -> lists).

    Raises:
        _NotJSON: naming the type JSON cannot hold.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.generic, np.ndarray)) and value.dtype.kind in "biufU":
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise _NotJSON(f"a dict with non-string key {bad[0]!r}")
        return {k: _jsonable(v) for k, v in value.items()}
    raise _NotJSON(type(value).__name__)


def _warn_once(tag: str, message: str, *args: Any) -> None:
    if tag not in _warned:
        _warned.add(tag)
        logger.warning(message, *args)


def _encode_infos(infos: np.ndarray) -> Dict[str, Any]:
    """The `infos` column: one dict per row; an entry JSON cannot hold is dropped (warned once per key)."""
    rows = []
    for info in infos:
        if not isinstance(info, dict):
            info = {} if info is None else {"info": info}  # what a hand-made batch may hold
        row = {}
        for key, value in info.items():
            try:
                if not isinstance(key, str):
                    raise _NotJSON(f"a non-string key of type {type(key).__name__}")
                row[key] = _jsonable(value)
            except _NotJSON as e:
                _warn_once(f"infos/{key!r}", "output: dropping the info entry %r from the written 'infos' column: JSON "
                           "cannot hold its value (%s); store numbers, strings, lists or dicts of them in infos to "
                           "keep it", key, e)
        rows.append(row)
    return {"dtype": JSON_DTYPE, "data": rows}


def _encode_column(array: np.ndarray, compress: bool, key: str = "") -> Optional[Dict[str, Any]]:
    array = np.asarray(array)
    if key == SampleBatch.INFOS and array.dtype == object and array.ndim == 1:
        return _encode_infos(array)
    if array.dtype.kind not in _KINDS:
        _warn_once(f"column/{key}", "output: column %r (dtype %s) is not written: only bool, int, float columns "
                   "and 'infos' (dicts) are", key, array.dtype)
        return None
    if compress:
        raw = np.ascontiguousarray(array).tobytes()
        return {"dtype": array.dtype.str, "shape": list(array.shape), "codec": "lz4",
                "data": base64.b64encode(lz4.block.compress(raw)).decode("ascii")}
    return {"dtype": array.dtype.str, "data": array.tolist()}


def _encode_columns(batch: SampleBatch, compress_columns: Iterable[str]) -> Dict[str, Any]:
    batch = decompress_columns(batch)  # compress_observations: write plain arrays
    compress = set(compress_columns)
    out = {}
    for key, value in batch.items():
        encoded = _encode_column(value, key in compress, key)
        if encoded is not None:
            out[key] = encoded
    return out


def encode_batch(batch: Union[SampleBatch, MultiAgentBatch], compress_columns: Iterable[str] = (),
                 actions_normalized: Optional[bool] = None) -> str:
    """One JSON line (no trailing newline) for `batch`.

    Args:
        batch: a SampleBatch or MultiAgentBatch.
        compress_columns: columns to LZ4-compress (`output_compress_columns`).
        actions_normalized: recorded as the line's `actions_normalized` (None: omitted).
    """
    compress_columns = list(compress_columns)
    if isinstance(batch, MultiAgentBatch):
        line: Dict[str, Any] = {"type": "MultiAgentBatch", "count": int(batch.count), "policy_batches": {
            str(pid): {"count": int(b.count), "columns": _encode_columns(b, compress_columns)}
            for pid, b in batch.policy_batches.items()}}
    else:
        line = {"type": "SampleBatch", "count": int(batch.count),
                "columns": _encode_columns(batch, compress_columns)}
    if actions_normalized is not None:
        line["actions_normalized"] = bool(actions_normalized)
    return json.dumps(line, separators=(",", ":"), allow_nan=True)


# --- decoding -------------------------------------------------------------------------
def _infer(data: list, path: str, line: int, key: str) -> np.ndarray:
    try:
        array = np.asarray(data)
    except ValueError as e:  # ragged lists
        raise OfflineDataError(path, line, f"column {key!r} is not a rectangular list ({e})") from None
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    if array.dtype.kind in "bi":
        return array.astype(np.int64) if array.dtype.kind == "i" else array
    raise OfflineDataError(path, line, f"column {key!r} holds {array.dtype} values; expected numbers or booleans")


def _dtype(spec: Any, path: str, line: int, key: str) -> np.dtype:
    try:
        dtype = np.dtype(str(spec))
    except TypeError:
        raise OfflineDataError(path, line, f"column {key!r} has an unknown dtype {spec!r}") from None
    if dtype.kind not in _KINDS or dtype.hasobject:
        raise OfflineDataError(path, line, f"column {key!r} has dtype {spec!r}; only bool, int, uint and float "
                                           "columns are allowed")
    return dtype


def _decode_column(value: Any, path: str, line: int, key: str) -> np.ndarray:
    if isinstance(value, list):
        return _infer(value, path, line, key)
    if not isinstance(value, dict) or "data" not in value:
        raise OfflineDataError(path, line, f"column {key!r} is a {type(value).__name__}; expected a list or "
                                           "{'dtype', 'data'[, 'codec', 'shape']}")
    if value.get("dtype") == JSON_DTYPE:
        if not isinstance(value["data"], list) or "codec" in value:
            raise OfflineDataError(path, line, f"JSON column {key!r} needs 'data', a list with one value per row, "
                                               "and no 'codec'")
        rows = np.empty(len(value["data"]), dtype=object)
        for i, row in enumerate(value["data"]):  # one by one: never let NumPy split a list row
            rows[i] = row
        return rows
    dtype = _dtype(value.get("dtype", "float32"), path, line, key)
    codec = value.get("codec")
    if codec is None:
        try:
            return np.asarray(value["data"], dtype=dtype)
        except (ValueError, TypeError) as e:
            raise OfflineDataError(path, line, f"column {key!r} does not convert to {dtype} ({e})") from None
    if codec not in CODECS:
        raise OfflineDataError(path, line, f"column {key!r} has an unknown compression codec {codec!r}; "
                                           f"known: {list(CODECS)}")
    shape = value.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise OfflineDataError(path, line, f"compressed column {key!r} needs 'shape', a list of ints >= 0; "
                                           f"got {shape!r}")
    try:
        raw = lz4.block.decompress(base64.b64decode(value["data"], validate=True))
    except (binascii.Error, TypeError, ValueError, lz4.block.LZ4BlockError) as e:
        raise OfflineDataError(path, line, f"compressed column {key!r} is not valid base64 LZ4 data ({e})") from None
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise OfflineDataError(path, line, f"compressed column {key!r} holds {len(raw)} bytes; shape {shape} of "
                                           f"{dtype} needs {expected}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _decode_sample_batch(obj: Any, path: str, line: int, where: str) -> SampleBatch:
    if not isinstance(obj, dict) or not isinstance(obj.get("columns"), dict):
        raise OfflineDataError(path, line, f"{where} has no 'columns' object")
    columns = {str(k): _decode_column(v, path, line, str(k)) for k, v in obj["columns"].items()}
    lengths = {k: (len(v) if v.ndim else -1) for k, v in columns.items()}
    if len(set(lengths.values())) > 1 or -1 in lengths.values():
        raise OfflineDataError(path, line, f"{where}: columns have different numbers of rows: {lengths}")
    batch = SampleBatch(columns)
    count = obj.get("count")
    if count is not None and count != batch.count:
        raise OfflineDataError(path, line, f"{where}: 'count' is {count!r} but the columns have {batch.count} rows")
    return batch


def decode_line(text: str, path: str = "<string>", line: int = 1
                ) -> "tuple[Union[SampleBatch, MultiAgentBatch], Optional[bool]]":
    """`(batch, actions_normalized or None)` from one line of an offline file.

    Raises:
        OfflineDataError: naming `path`, `line` and what is wrong.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise OfflineDataError(path, line, f"not valid JSON ({e.msg} at column {e.colno}); a truncated or "
                                           "damaged line?") from None
    if not isinstance(obj, dict):
        raise OfflineDataError(path, line, f"a line must be a JSON object, got a {type(obj).__name__}")
    kind = obj.get("type", "SampleBatch")
    normalized = obj.get("actions_normalized")
    if normalized is not None and not isinstance(normalized, bool):
        raise OfflineDataError(path, line, f"'actions_normalized' must be true or false, got {normalized!r}")
    if kind == "SampleBatch":
        return _decode_sample_batch(obj, path, line, "the batch"), normalized
    if kind == "MultiAgentBatch":
        batches = obj.get("policy_batches")
        if not isinstance(batches, dict):
            raise OfflineDataError(path, line, "a MultiAgentBatch line needs 'policy_batches': {policy_id: batch}")
        parsed = {str(pid): _decode_sample_batch(b, path, line, f"policy {pid!r}") for pid, b in batches.items()}
        count = obj.get("count")
        if not isinstance(count, int) or count < 0:
            raise OfflineDataError(path, line, f"a MultiAgentBatch line needs 'count' (env steps), got {count!r}")
        return MultiAgentBatch(parsed, count), normalized
    raise OfflineDataError(path, line, f"unknown batch type {kind!r}; expected 'SampleBatch' or 'MultiAgentBatch'")
