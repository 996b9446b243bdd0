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

import numpy as np

from rlfleet.offline.batch_checks import prepare_batch, prepare_policy_batch  # noqa: F401 (prepare_policy_batch: re-exported)
from rlfleet.offline.io_context import IOContext, SamplerInput  # noqa: F401 (SamplerInput: re-exported)
from rlfleet.offline.json_format import OfflineDataError, decode_line
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.utils.seeding import derive_seed

logger = logging.getLogger(__name__)

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


# --- other sources ------------------------------------------------------------------------
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
