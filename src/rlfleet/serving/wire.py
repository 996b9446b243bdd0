"""The bytes that travel between policy clients and servers: msgpack or JSON, never pickle.

| what                     | form                                                                  |
| ------------------------ | --------------------------------------------------------------------- |
| a request / answer body  | a msgpack map (`application/msgpack`) or a JSON object (`application/json`) |
| a NumPy array (msgpack)  | `{"__ndarray__": true, "dtype": "<f4", "shape": [..], "data": <raw bytes>}` |
| a NumPy array (JSON)     | nested lists                                                          |
| a batch (`report_samples`) | `{"count": env steps, "policies": {policy_id: {column: array}}}`    |
| an episode's metrics     | `{"episode_length": int, "episode_reward": float, "custom_metrics": {..}, "agent_rewards": [[agent, policy, reward], ..]}` |
| weights (`get_weights`)  | safetensors bytes (`application/octet-stream`), keys `policy_id/name` |

Only numeric and boolean dtypes (and fixed-width bytes, for LZ4-compressed observation
columns) are rebuilt from a body; anything else is a `WireError`. A body that looks like a
pickle (its protocol header) is refused before it is parsed, whatever its content type says.
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

import msgpack
import numpy as np

from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics

MSGPACK = "application/msgpack"
JSON = "application/json"
OCTETS = "application/octet-stream"
CONTENT_TYPES = (MSGPACK, JSON)
_ND = "__ndarray__"
# Kinds a body may hold: bool, signed / unsigned int, float, complex, fixed-width bytes.
_ALLOWED_KINDS = frozenset("biufcS")
# A pickle starts with the PROTO opcode (0x80) and its protocol number (2..5); an empty
# msgpack map is 0x80 too, but never followed by more bytes.
_PICKLE_PROTOCOLS = frozenset(range(2, 6))


class WireError(ValueError):
    """A body that cannot be read; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def looks_pickled(body: bytes) -> bool:
    return len(body) > 1 and body[0] == 0x80 and body[1] in _PICKLE_PROTOCOLS


# --- bodies ---------------------------------------------------------------------------------
def encode_body(value: Mapping[str, Any], content_type: str = MSGPACK) -> bytes:
    if content_type == JSON:
        return json.dumps(_to_json(value), allow_nan=False).encode("utf-8")
    return msgpack.packb(value, default=_pack_default, use_bin_type=True)


def decode_body(body: bytes, content_type: str) -> Dict[str, Any]:
    """The map a body holds (arrays rebuilt); a WireError naming the problem otherwise."""
    if looks_pickled(body):
        raise WireError("the body is a Python pickle; pickles are refused (unpickling runs code): send msgpack "
                        f"({MSGPACK}) or JSON ({JSON})", 415)
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind not in CONTENT_TYPES:
        raise WireError(f"Content-Type {content_type!r} is not accepted; send {MSGPACK} or {JSON}", 415)
    try:
        if kind == JSON:
            value = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
        else:
            value = msgpack.unpackb(body, raw=False, strict_map_key=False, object_hook=_unpack_hook)
    except WireError:
        raise
    except Exception as exc:  # msgpack / json raise several types for malformed input
        raise WireError(f"malformed {kind} body ({type(exc).__name__}: {exc})") from None
    if not isinstance(value, dict):
        raise WireError(f"the body must be a map (object), got a {type(value).__name__}")
    return value


def _no_constant(name: str) -> Any:
    raise WireError(f"the JSON body holds {name}, which is not a number JSON allows")


def _pack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {_ND: True, "dtype": arr.dtype.str, "shape": list(arr.shape), "data": arr.tobytes()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"cannot send a {type(obj).__name__} ({obj!r:.80}) over the wire")


def _unpack_hook(obj: Dict[Any, Any]) -> Any:
    if obj.get(_ND) is not True:
        return obj
    try:
        dtype = np.dtype(obj["dtype"])
        shape = tuple(int(n) for n in obj["shape"])
        data = obj["data"]
    except Exception as exc:
        raise WireError(f"malformed array ({type(exc).__name__}: {exc})") from None
    if dtype.kind not in _ALLOWED_KINDS or dtype.hasobject:
        raise WireError(f"array dtype {dtype.str!r} is not accepted (numbers, booleans and bytes only)")
    if not isinstance(data, bytes) or any(n < 0 for n in shape) or len(data) != dtype.itemsize * math.prod(shape):
        raise WireError(f"array of dtype {dtype.str} and shape {list(shape)} does not match its {len(data)} "
                        "data bytes" if isinstance(data, bytes) else "array data must be bytes")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _to_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def plain(value: Any) -> Any:
    """An action (or any value the env returned) as msgpack / JSON can carry it."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def as_arrays(value: Any) -> Any:
    """A decoded value with its numeric lists as arrays (what the spaces' checks expect)."""
    if isinstance(value, dict):
        return {k: as_arrays(v) for k, v in value.items()}
    if isinstance(value, list):
        try:
            arr = np.asarray(value)
        except ValueError:  # ragged: a Tuple space's parts
            return tuple(as_arrays(v) for v in value)
        if arr.dtype.kind in "biuf":
            return arr
        return tuple(as_arrays(v) for v in value)
    return value


# --- fields -----------------------------------------------------------------------------------
def field(body: Mapping[str, Any], name: str, kinds: Tuple[type, ...], default: Any = ...) -> Any:
    """`body[name]`, checked to be one of `kinds` (a WireError naming the field otherwise)."""
    if name not in body:
        if default is ...:
            raise WireError(f"the request lacks the field {name!r}")
        return default
    value = body[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise WireError(f"field {name!r} must be {names}, got {type(value).__name__}")
    return value


# --- batches ------------------------------------------------------------------------------------
def encode_batch(batch: MultiAgentBatch) -> Dict[str, Any]:
    return {"count": int(batch.count), "policies": {pid: dict(part) for pid, part in batch.policy_batches.items()}}


def decode_batch(value: Any, policy_ids: List[str], max_rows: int) -> MultiAgentBatch:
    """A MultiAgentBatch from `encode_batch` output, checked: known policies, array columns of
    equal length, at most `max_rows` rows each, finite rewards."""
    if not isinstance(value, dict):
        raise WireError("field 'batch' must be a map {count, policies}")
    count = field(value, "count", (int,))
    policies = field(value, "policies", (dict,))
    if count < 1 or count > max_rows:
        raise WireError(f"batch count {count} is outside 1..{max_rows}")
    parts = {}
    for pid, columns in policies.items():
        if pid not in policy_ids:
            raise WireError(f"batch holds policy {pid!r}; this server's policies are {sorted(policy_ids)}")
        if not isinstance(columns, dict) or not columns:
            raise WireError(f"batch of policy {pid!r} must be a non-empty map {{column: array}}")
        for name, column in columns.items():
            if not isinstance(column, np.ndarray):
                raise WireError(f"batch column {pid}/{name} must be an array, got {type(column).__name__}")
        lengths = {name: len(column) if column.ndim else -1 for name, column in columns.items()}
        if len(set(lengths.values())) != 1 or -1 in lengths.values():
            raise WireError(f"batch columns of policy {pid!r} differ in length: {lengths}")
        rows = next(iter(lengths.values()))
        if rows > max_rows:
            raise WireError(f"batch of policy {pid!r} has {rows} rows, more than the {max_rows} accepted")
        for name in (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS):
            if name not in columns:
                raise WireError(f"batch of policy {pid!r} lacks the column {name!r}")
        rewards = columns[SampleBatch.REWARDS]
        if rewards.dtype.kind not in "iuf" or not np.isfinite(rewards).all():
            raise WireError(f"batch of policy {pid!r}: rewards must be finite numbers")
        parts[pid] = SampleBatch(columns)
    if not parts:
        raise WireError("the batch holds no policy's samples")
    return MultiAgentBatch(parts, count)


# --- metrics ------------------------------------------------------------------------------------
def encode_metrics(metrics: List[RolloutMetrics]) -> List[Dict[str, Any]]:
    return [{"episode_length": int(m.episode_length), "episode_reward": float(m.episode_reward),
             "custom_metrics": {str(k): float(v) for k, v in m.custom_metrics.items()},
             "agent_rewards": [[plain(a), str(p), float(r)] for (a, p), r in m.agent_rewards.items()]}
            for m in metrics]


def decode_metrics(value: Any) -> List[RolloutMetrics]:
    if not isinstance(value, list):
        raise WireError("field 'metrics' must be a list of episode metrics")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            raise WireError(f"metrics[{i}] must be a map")
        length = field(m, "episode_length", (int,))
        reward = field(m, "episode_reward", (int, float))
        custom = field(m, "custom_metrics", (dict,), {})
        agent_rewards = field(m, "agent_rewards", (list,), [])
        numbers = [reward] + list(custom.values()) + [r[2] for r in agent_rewards if isinstance(r, list) and len(r) == 3]
        if length < 0 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                                 for x in numbers):
            raise WireError(f"metrics[{i}]: lengths must be >= 0 and rewards / custom metrics finite numbers")
        if any(not (isinstance(r, list) and len(r) == 3) for r in agent_rewards):
            raise WireError(f"metrics[{i}].agent_rewards must be [agent, policy, reward] triples")
        out.append(RolloutMetrics(length, float(reward), {str(k): float(v) for k, v in custom.items()},
                                  agent_rewards={(_key(a), str(p)): float(r) for a, p, r in agent_rewards}))
    return out


def _key(agent: Any) -> Any:
    return tuple(agent) if isinstance(agent, list) else agent


# --- weights ------------------------------------------------------------------------------------
_TIMESTEP_KEY = "__global_timestep__"


def encode_weights(weights: Mapping[str, Mapping[str, np.ndarray]], timestep: int) -> bytes:
    """`{policy_id: {name: array}}` and the global timestep as safetensors bytes."""
    from rlfleet.utils.safe_files import safetensors_bytes

    flat = {f"{pid}/{name}": np.asarray(arr) for pid, ws in weights.items() for name, arr in ws.items()}
    flat[_TIMESTEP_KEY] = np.asarray([timestep], np.int64)
    return safetensors_bytes(flat)


def decode_weights(data: bytes) -> Tuple[Dict[str, Dict[str, np.ndarray]], int]:
    from rlfleet.utils.safe_files import parse_safetensors

    flat = parse_safetensors(data, "the server's weights")
    timestep = int(flat.pop(_TIMESTEP_KEY)[0])
    out: Dict[str, Dict[str, np.ndarray]] = {}
    for key, arr in flat.items():
        pid, _, name = key.partition("/")
        out.setdefault(pid, {})[name] = arr
    return out, timestep


def content_type_of(headers: Mapping[str, str]) -> Optional[str]:
    return headers.get("Content-Type") or headers.get("content-type")
