"""PolicyMap: policy id -> Policy, keeping at most `capacity` policies in memory.

When more policies exist (a self-play league can hold hundreds), the least-recently-used
ones are written to a cache folder and dropped from memory; using one again (``map[pid]``)
rebuilds it from its class, spaces and config and loads its state back. The files are a
``safetensors`` file for every array (weights, optimizer moments, RNG states) and a JSON file
for the rest: nothing is pickled, so loading them never runs code. The files name no class or
function (the policy's class, spaces and config stay in memory): nothing is imported on load.
Their SHA-256 digests stay in memory too, so a file changed on disk after the spill (another
user of a shared cache folder) is refused with `CheckpointError`, never loaded.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np

from rlfleet.utils.safe_files import CheckpointError, parse_json, parse_safetensors, safetensors_bytes, sha256_hex


class _Spill(NamedTuple):
    json_path: str
    st_path: str
    json_sha256: str
    st_sha256: str


class _Spec(NamedTuple):
    policy_class: type
    observation_space: Any
    action_space: Any
    config: dict


def build_policy(policy_class: type, observation_space, action_space, config: dict, policy_id: str):
    """`policy_class(obs_space, act_space, config)`, passing `policy_id` when it takes one."""
    try:
        params = inspect.signature(policy_class).parameters
    except (TypeError, ValueError):
        params = {}
    takes_id = "policy_id" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    if takes_id:
        return policy_class(observation_space, action_space, config, policy_id=policy_id)
    policy = policy_class(observation_space, action_space, config)
    policy.policy_id = policy_id
    return policy


# --- state <-> (JSON tree, arrays) -----------------------------------------------------
def _encode(value: Any, arrays: Dict[str, np.ndarray], path: str) -> Any:
    """A JSON-able tree for `value`; arrays are moved into `arrays` and referenced by key."""
    try:
        import torch
        if isinstance(value, torch.Tensor):
            value = {"__tensor__": _encode(value.detach().cpu().numpy(), arrays, path)}
            return value
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"policy state entry {path!r} is an object array; cannot spill it safely")
        key = f"{len(arrays)}:{path}"[:200]
        # (np.ascontiguousarray would turn 0-d arrays, e.g. Adam's step, into 1-d ones.)
        arrays[key] = value if value.flags.c_contiguous else value.copy(order="C")
        return {"__array__": key}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return {"__list__": [_encode(v, arrays, f"{path}/{i}") for i, v in enumerate(value)],
                "tuple": isinstance(value, tuple)}
    if isinstance(value, dict):
        return {"__items__": [[_encode(k, arrays, f"{path}/key"), _encode(v, arrays, f"{path}/{k}")]
                              for k, v in value.items()]}
    raise TypeError(f"policy state entry {path!r} is a {type(value).__name__}; only arrays, numbers, "
                    "strings, lists and dicts can be spilled to the policy map cache")


def _decode(tree: Any, arrays: Dict[str, np.ndarray]) -> Any:
    if isinstance(tree, dict):
        if "__array__" in tree:
            return arrays[tree["__array__"]]
        if "__tensor__" in tree:
            import torch
            return torch.from_numpy(np.array(_decode(tree["__tensor__"], arrays)))
        if "__list__" in tree:
            items = [_decode(v, arrays) for v in tree["__list__"]]
            return tuple(items) if tree.get("tuple") else items
        if "__items__" in tree:
            return {_decode(k, arrays): _decode(v, arrays) for k, v in tree["__items__"]}
        raise CheckpointError(f"unknown entry in a policy map cache file: {sorted(tree)}")
    return tree


def policy_full_state(policy) -> Dict[str, Any]:
    """What a rebuilt copy needs to continue exactly: `policy.get_state()` (weights,
    counters, every optimizer and the random generators of a TorchPolicy)."""
    return {"policy": policy.get_state()}


def set_policy_full_state(policy, state: Dict[str, Any]) -> None:
    policy.set_state(state["policy"])


class PolicyMap(MutableMapping):
    """An LRU map of policies that spills beyond `capacity` to `cache_dir`.

    Args:
        capacity: policies kept in memory (>= 1).
        cache_dir: the folder for spilled policies; this map writes into its own new
            sub-folder there (several workers may share one `cache_dir`). None: a folder
            under the system temp dir. Nothing is created until the first spill.
    """

    def __init__(self, *, capacity: int = 100, cache_dir: Optional[str] = None):
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"'multiagent.policy_map_capacity': {capacity!r} must be an int >= 1")
        self.capacity = capacity
        self.cache_root = cache_dir
        self._dir: Optional[str] = None
        self._mem: "OrderedDict[str, Any]" = OrderedDict()  # LRU order: oldest first
        self._specs: Dict[str, _Spec] = {}  # every policy, in memory or not (insertion order)
        self._spilled: Dict[str, _Spill] = {}  # pid -> its two files and their digests

    # --- building ----------------------------------------------------------------------
    def create_policy(self, policy_id: str, policy_class: type, observation_space, action_space,
                      config: dict):
        """Builds a policy, stores it under `policy_id` and returns it."""
        policy = build_policy(policy_class, observation_space, action_space, config, policy_id)
        self[policy_id] = policy
        return policy

    # --- mapping protocol ----------------------------------------------------------------
    def __getitem__(self, policy_id: str):
        if policy_id in self._mem:
            self._mem.move_to_end(policy_id)
            return self._mem[policy_id]
        if policy_id not in self._spilled:
            raise KeyError(policy_id)
        policy = self._restore(policy_id)
        self._mem[policy_id] = policy
        self._evict()
        return policy

    def __setitem__(self, policy_id: str, policy) -> None:
        if policy_id in self._spilled:
            self._drop_files(policy_id)
        self._specs[policy_id] = _Spec(type(policy), policy.observation_space, policy.action_space, policy.config)
        self._mem[policy_id] = policy
        self._mem.move_to_end(policy_id)
        self._evict()

    def __delitem__(self, policy_id: str) -> None:
        if policy_id not in self._specs:
            raise KeyError(policy_id)
        self._mem.pop(policy_id, None)
        if policy_id in self._spilled:
            self._drop_files(policy_id)
        del self._specs[policy_id]

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"PolicyMap(in memory: {list(self._mem)}, spilled: {list(self._spilled)})"

    # --- introspection ---------------------------------------------------------------------
    def in_memory(self) -> List[str]:
        """Ids of the policies held in memory, least recently used first."""
        return list(self._mem)

    def in_memory_policies(self) -> List[Any]:
        """The policies held in memory, least recently used first (their use order unchanged)."""
        return list(self._mem.values())

    def spilled(self) -> List[str]:
        """Ids of the policies that live on disk right now."""
        return list(self._spilled)

    @property
    def cache_dir(self) -> Optional[str]:
        """This map's own spill folder (None until the first spill)."""
        return self._dir

    def close(self) -> None:
        """Deletes this map's spill folder."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            self._spilled.clear()

    # --- spilling ----------------------------------------------------------------------------
    def _evict(self) -> None:
        while len(self._mem) > self.capacity:
            pid, policy = self._mem.popitem(last=False)
            try:
                self._spill(pid, policy)
            except OSError as exc:
                # Keep the policy (in memory, over capacity) rather than lose it.
                self._mem[pid] = policy
                self._mem.move_to_end(pid, last=False)
                raise OSError(exc.errno, f"policy map: spilling policy {pid!r} to {self._dir!r} failed ({exc}); "
                                         "it stays in memory. Free space there or set "
                                         "'multiagent.policy_map_cache' to another folder") from exc

    def _paths(self, policy_id: str) -> Tuple[str, str]:
        if self._dir is None:
            root = self.cache_root or tempfile.gettempdir()
            os.makedirs(root, exist_ok=True)
            self._dir = tempfile.mkdtemp(prefix="policy_map_", dir=root)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(policy_id))[:64]
        digest = hashlib.sha256(str(policy_id).encode()).hexdigest()[:12]
        base = os.path.join(self._dir, f"{safe}-{digest}")
        return base + ".json", base + ".safetensors"

    def _spill(self, policy_id: str, policy) -> None:
        arrays: Dict[str, np.ndarray] = {}
        tree = _encode(policy_full_state(policy), arrays, "state")
        st_data = safetensors_bytes(arrays)
        json_data = json.dumps({"policy_id": policy_id, "state": tree}).encode("utf-8")
        json_path, st_path = self._paths(policy_id)
        try:
            for path, data in ((st_path, st_data), (json_path, json_data)):
                with open(path, "wb") as f:
                    f.write(data)
        except BaseException:
            for path in (st_path, json_path):
                if os.path.exists(path):
                    os.remove(path)
            raise
        self._spilled[policy_id] = _Spill(json_path, st_path, sha256_hex(json_data), sha256_hex(st_data))

    def _read(self, path: str, digest: str) -> bytes:
        with open(path, "rb") as f:
            data = f.read()
        if sha256_hex(data) != digest:
            raise CheckpointError(f"policy map cache file {path!r} changed on disk after it was written (its "
                                  "SHA-256 differs); refusing to load it. Give each run its own "
                                  "'multiagent.policy_map_cache' folder")
        return data

    def _restore(self, policy_id: str):
        spill = self._spilled[policy_id]
        tree = parse_json(self._read(spill.json_path, spill.json_sha256), spill.json_path)["state"]
        arrays = parse_safetensors(self._read(spill.st_path, spill.st_sha256), spill.st_path)
        state = _decode(tree, arrays)
        spec = self._specs[policy_id]
        policy = build_policy(spec.policy_class, spec.observation_space, spec.action_space, spec.config, policy_id)
        set_policy_full_state(policy, state)
        self._drop_files(policy_id)
        return policy

    def _drop_files(self, policy_id: str) -> None:
        spill = self._spilled.pop(policy_id)
        for path in (spill.json_path, spill.st_path):
            if os.path.exists(path):
                os.remove(path)
