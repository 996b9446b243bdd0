"""Input readers: where a worker's batches come from when `input` is not "sampler".

A reader has one method, `next() -> SampleBatch | MultiAgentBatch`. `make_input_reader`
builds the one `input` asks for:

- a file, folder, glob, or a list of them: `JsonReader` (remote workers split the files);
- `"sampler"`: the worker's env sampler (`SamplerInput`);
- `{"sampler": 0.4, "path/": 0.6}`: `MixedInput` draws each batch from one source with
  those probabilities;
- a name given to `register_input(name, creator)`, or a callable: `creator(IOContext)`;
- `"minari:<dataset id>"`: a locally installed Minari dataset (rlfleet.offline.minari_input).

With `shuffle_buffer_size > 0` batches pass through a `ShuffledInput`.
"""
from __future__ import annotations

import glob
import logging
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import gymnasium as gym
import numpy as np

from rlfleet.offline.io_context import IOContext
from rlfleet.offline.json_format import OfflineDataError, decode_line
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from rlfleet.utils.seeding import derive_seed
from rlfleet.utils.spaces import action_layout, is_bounded_box

logger = logging.getLogger(__name__)

SB = SampleBatch
Batch = Union[SampleBatch, MultiAgentBatch]

_INPUT_REGISTRY: Dict[str, Callable[[IOContext], Any]] = {}


def register_input(name: str, creator: Callable[[IOContext], Any]) -> None:
    """Makes `input: name` build a reader with `creator(ioctx)` (an object with `next()`).

    Args:
        name: the name used as `input` (must not look like a path or be "sampler").
        creator: `IOContext -> reader`.
    """
    if not isinstance(name, str) or not name or name == "sampler":
        raise ValueError(f"register_input: {name!r} is not a usable input name")
    if not callable(creator):
        raise ValueError(f"register_input({name!r}, ...): the creator must be a callable IOContext -> reader")
    _INPUT_REGISTRY[name] = creator


def registered_input(name: str) -> Optional[Callable[[IOContext], Any]]:
    return _INPUT_REGISTRY.get(name)


# --- files ----------------------------------------------------------------------------
def expand_files(spec: Union[str, List[str]]) -> List[str]:
    """The files of a path, folder (its `*.json` files), glob, or list of them (sorted
    within each entry).

    Raises:
        ValueError: naming the entry that matches no file.
    """
    entries = [spec] if isinstance(spec, str) else list(spec)
    files: List[str] = []
    for entry in entries:
        path = os.path.expanduser(str(entry))
        if os.path.isdir(path):
            found = sorted(f for f in glob.glob(os.path.join(path, "*.json")) if os.path.isfile(f))
        elif any(c in path for c in "*?["):
            found = sorted(f for f in glob.glob(path) if os.path.isfile(f))
        else:
            found = [path] if os.path.isfile(path) else []
        if not found:
            what = "folder holds no .json files" if os.path.isdir(path) else (
                "glob matches no file" if any(c in path for c in "*?[") else "file does not exist")
            raise ValueError(f"'input': {entry!r}: the {what}")
        files.extend(found)
    return files


class JsonReader:
    """Reads batches from JSON-lines files (format: json_format.py), forever.

    Files are visited in a seeded random order, each line in turn; every batch is checked
    against the worker's policies' spaces, and Box actions written in the env's space are
    normalized (`actions_in_input_normalized`). Remote workers read disjoint shares of the
    files (worker i the files i-1, i-1+n, ...; all files when there are fewer than workers).

    Args:
        inputs: a file, folder, glob or list of them.
        ioctx: the worker's IOContext (None: no space checks, no normalization).
    """

    def __init__(self, inputs: Union[str, List[str]], ioctx: Optional[IOContext] = None):
        self.ioctx = ioctx or IOContext()
        files = expand_files(inputs)
        n, i = self.ioctx.num_workers, self.ioctx.worker_index
        if n > 0 and i > 0:
            share = files[i - 1::n]
            if share:
                files = share
            else:
                logger.warning("Fewer input files (%d) than remote workers (%d): worker %d reads all of them",
                               len(files), n, i)
        self.files = files
        seed = self.ioctx.config.get("seed")
        self._rng = np.random.default_rng(None if seed is None else derive_seed(seed, i, "json_reader"))
        self._lines: Optional[Iterator[Tuple[str, int, str]]] = None

    def _line_stream(self) -> Iterator[Tuple[str, int, str]]:
        while True:
            any_batch = False
            for k in self._rng.permutation(len(self.files)):
                path = self.files[int(k)]
                found = False
                try:
                    f = open(path, encoding="utf-8")
                except OSError as e:
                    raise OfflineDataError(path, None, f"cannot be opened ({e.strerror})") from None
                with f:
                    for lineno, text in enumerate(f, 1):
                        if text.strip():
                            found = any_batch = True
                            yield path, lineno, text
                if not found:
                    logger.warning("Offline input file %s holds no batches", path)
            if not any_batch:
                raise OfflineDataError(self.files[0] if len(self.files) == 1 else str(self.files), None,
                                       "the input files hold no batches (all empty)")

    def next(self) -> Batch:
        """The next batch (files restart from the beginning once all are read)."""
        if self._lines is None:
            self._lines = self._line_stream()
        path, lineno, text = next(self._lines)
        batch, normalized = decode_line(text, path, lineno)
        return prepare_batch(batch, normalized, self.ioctx, path, lineno)


# --- checking and normalizing what was read ---------------------------------------------
def _require_columns(batch: SampleBatch, path: str, line: Optional[int], where: str) -> SampleBatch:
    missing = [c for c in (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.EPS_ID) if c not in batch]
    if SB.TERMINATEDS not in batch and SB.DONES not in batch:
        missing.append("terminateds (or dones)")
    if missing:
        raise OfflineDataError(path, line, f"{where} lacks the required column(s) {missing}; it has "
                                           f"{sorted(batch.keys())}")
    if SB.TERMINATEDS not in batch:  # older data: `dones` only (taken as terminal)
        batch[SB.TERMINATEDS] = batch[SB.DONES].astype(bool)
    if SB.TRUNCATEDS not in batch:
        batch[SB.TRUNCATEDS] = (batch[SB.DONES].astype(bool) & ~batch[SB.TERMINATEDS].astype(bool)
                                if SB.DONES in batch else np.zeros(batch.count, bool))
    if SB.DONES not in batch:
        batch[SB.DONES] = batch[SB.TERMINATEDS].astype(bool) | batch[SB.TRUNCATEDS].astype(bool)
    if SB.T not in batch:
        batch[SB.T] = _steps_within_episodes(batch[SB.EPS_ID])
    return batch


def _steps_within_episodes(eps_id: np.ndarray) -> np.ndarray:
    n = len(eps_id)
    starts = np.ones(n, bool)
    starts[1:] = eps_id[1:] != eps_id[:-1]
    idx = np.arange(n)
    return idx - np.maximum.accumulate(np.where(starts, idx, 0))


def _check_fits(batch: SampleBatch, policy, config: dict, normalized: bool, path: str, line: Optional[int],
                where: str) -> None:
    obs_space, act_space = policy.observation_space, policy.action_space
    obs = batch[SB.OBS]
    if isinstance(obs_space, gym.spaces.Box) and obs.ndim >= 1:
        if tuple(obs.shape[1:]) != tuple(obs_space.shape):
            raise OfflineDataError(path, line, f"{where}: observations have shape {tuple(obs.shape[1:])}, the "
                                               f"policy's observation space {obs_space} needs {obs_space.shape}")
        if config.get("observation_filter", "NoFilter") == "NoFilter" and obs.dtype.kind in "biuf":
            bad = ~((obs >= obs_space.low - 1e-5) & (obs <= obs_space.high + 1e-5))
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise OfflineDataError(path, line, f"{where}: observation of row {row} {obs[row].tolist()} is "
                                                   f"outside the observation space {obs_space}")
    actions = batch[SB.ACTIONS]
    row_shape, _ = action_layout(act_space)
    if tuple(actions.shape[1:]) != tuple(row_shape):
        raise OfflineDataError(path, line, f"{where}: actions have row shape {tuple(actions.shape[1:])}, the action "
                                           f"space {act_space} needs {tuple(row_shape)}")
    if isinstance(act_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        if actions.dtype.kind == "f" and not np.all(np.mod(actions, 1) == 0):
            raise OfflineDataError(path, line, f"{where}: actions must be integers for the action space {act_space}")
        if isinstance(act_space, gym.spaces.Discrete):
            high = np.full(1, act_space.n)
        elif isinstance(act_space, gym.spaces.MultiDiscrete):
            high = np.asarray(act_space.nvec).ravel()
        else:
            high = np.full(1, 2)
        bad = (actions < 0) | (actions >= high)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise OfflineDataError(path, line, f"{where}: action of row {row} ({actions[row].tolist()}) is outside the "
                                               f"action space {act_space}")
    elif isinstance(act_space, gym.spaces.Box) and not normalized:
        low, high = act_space.low.ravel(), act_space.high.ravel()
        bad = ~((actions >= low - 1e-5) & (actions <= high + 1e-5))
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise OfflineDataError(
                path, line, f"{where}: action of row {row} ({actions[row].tolist()}) is outside the action space "
                            f"{act_space}; if the file holds normalized actions, set 'actions_in_input_normalized': True")


def _normalize_actions(batch: SampleBatch, space: gym.Space) -> None:
    """Env-space Box actions -> the policy's normalized [-1, 1] space (inverse of unsquash)."""
    if is_bounded_box(space):
        low, high = space.low.ravel(), space.high.ravel()
        batch[SB.ACTIONS] = (2.0 * (batch[SB.ACTIONS] - low) / (high - low) - 1.0).astype(np.float32)


def prepare_policy_batch(batch: SampleBatch, policy, config: dict, normalized: Optional[bool], path: str,
                         line: Optional[int], where: str = "the batch") -> SampleBatch:
    """Checks one policy's batch (columns, spaces) and normalizes its Box actions when they
    are in the env's space; fills `terminateds` / `truncateds` / `dones` / `t` from the others."""
    batch = _require_columns(batch, path, line, where)
    if normalized is None:
        normalized = bool(config.get("actions_in_input_normalized", False))
    if policy is not None:
        _check_fits(batch, policy, config, normalized, path, line, where)
        if (not normalized and config.get("normalize_actions", True)
                and isinstance(policy.action_space, gym.spaces.Box)):
            _normalize_actions(batch, policy.action_space)
    return batch


def prepare_batch(batch: Batch, normalized: Optional[bool], ioctx: IOContext, path: str,
                  line: Optional[int]) -> Batch:
    """`prepare_policy_batch` for every policy's part of `batch`, with the worker's policies."""
    worker = ioctx.worker
    policy_map = getattr(worker, "policy_map", None)
    config = ioctx.config
    if isinstance(batch, MultiAgentBatch):
        out = {}
        for pid, b in batch.policy_batches.items():
            if policy_map is not None and pid not in policy_map:
                raise OfflineDataError(path, line, f"holds samples of policy {pid!r}, which this trainer does not have "
                                                   f"(its policies: {sorted(policy_map)})")
            policy = policy_map[pid] if policy_map is not None else None
            out[pid] = prepare_policy_batch(b, policy, config, normalized, path, line, f"policy {pid!r}")
        return MultiAgentBatch(out, batch.count)
    policy = None
    if policy_map is not None:
        if DEFAULT_POLICY_ID in policy_map:
            policy = policy_map[DEFAULT_POLICY_ID]
        elif len(policy_map) == 1:
            policy = next(iter(policy_map.values()))
        else:
            raise OfflineDataError(path, line, "holds a single-agent batch, but this trainer has several policies "
                                               f"{sorted(policy_map)} and none is {DEFAULT_POLICY_ID!r}")
    return prepare_policy_batch(batch, policy, config, normalized, path, line)


# --- other sources ------------------------------------------------------------------------
class SamplerInput:
    """The env sampler as a reader: `next()` samples one batch."""

    def __init__(self, sampler):
        self.sampler = sampler

    def next(self) -> Batch:
        return self.sampler.sample()


class MixedInput:
    """Each `next()` reads from one source, drawn with the given probabilities.

    Args:
        dist: `{source: probability}`; a source is "sampler" or anything `input` takes.
        ioctx: the worker's IOContext.
    """

    def __init__(self, dist: Dict[Any, float], ioctx: IOContext):
        self.sources = [make_input_reader(source, ioctx, mixed=False) for source in dist]
        self.probs = np.asarray([float(p) for p in dist.values()], np.float64)
        seed = ioctx.config.get("seed")
        self._rng = np.random.default_rng(None if seed is None else derive_seed(seed, ioctx.worker_index,
                                                                                "mixed_input"))

    def next(self) -> Batch:
        k = int(self._rng.choice(len(self.sources), p=self.probs))
        return self.sources[k].next()


class ShuffledInput:
    """Batches through a buffer of `size`: each `next()` returns a random buffered batch and
    refills its slot (input starts once the buffer is full)."""

    def __init__(self, reader, size: int, seed: Optional[int] = None):
        self.reader = reader
        self.size = int(size)
        self.buffer: List[Batch] = []
        self._rng = np.random.default_rng(seed)

    def next(self) -> Batch:
        while len(self.buffer) < self.size:
            self.buffer.append(self.reader.next())
        k = int(self._rng.integers(len(self.buffer)))
        out, self.buffer[k] = self.buffer[k], self.reader.next()
        return out


def make_input_reader(spec: Any, ioctx: IOContext, mixed: bool = True):
    """The reader for `input: spec` (see the module docstring)."""
    if callable(spec):
        return spec(ioctx)
    if isinstance(spec, dict):
        if not mixed:
            raise ValueError(f"'input': a mixture cannot contain another mixture ({spec!r})")
        return MixedInput(spec, ioctx)
    if spec == "sampler":
        return ioctx.default_sampler_input()
    if isinstance(spec, str) and spec in _INPUT_REGISTRY:
        return _INPUT_REGISTRY[spec](ioctx)
    if isinstance(spec, str) and spec.startswith("minari:"):
        from rlfleet.offline.minari_input import MinariReader

        return MinariReader(spec[len("minari:"):], ioctx)
    return JsonReader(spec, ioctx)


def check_input_spec(value: Any) -> Any:
    """The config check of `input` (raises ValueError with what is allowed)."""
    allowed = ('"sampler", a file, folder or glob, a list of them, a dict {source: probability} summing to 1, '
               "a name given to register_input, \"minari:<dataset id>\", or a callable IOContext -> reader")
    if callable(value) or isinstance(value, str) and value:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    if isinstance(value, dict) and value:
        probs = list(value.values())
        if not all(isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0 for p in probs):
            raise ValueError(f"'input': {value!r}: every probability must be a number >= 0")
        if abs(sum(probs) - 1.0) > 1e-6:
            raise ValueError(f"'input': {value!r}: the probabilities sum to {sum(probs):g}; they must sum to 1")
        for source in value:
            if isinstance(source, dict) or not (callable(source) or isinstance(source, str)):
                raise ValueError(f"'input': {value!r}: source {source!r} must be \"sampler\", a path or glob, a "
                                 "registered name or a callable")
        return value
    raise ValueError(f"'input': {value!r} is invalid; expected {allowed}")
