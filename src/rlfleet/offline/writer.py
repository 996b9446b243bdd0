"""JsonWriter: appends every sampled batch to JSON-lines files (format: json_format.py).

Files are named `output-<start time>_worker-<worker index>_<k>.json`, so the workers of one
run never write the same file; a new file starts once one passes `output_max_file_size`.
Nothing is opened before the first batch.
"""
from __future__ import annotations

import os
import time
from typing import IO, Iterable, Optional, Union

import gymnasium as gym

from rlfleet.offline.json_format import encode_batch
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch


class JsonWriter:
    """Writes batches as JSON lines into `path`.

    Args:
        path: the output folder (made if missing).
        max_file_size: bytes after which the next batch goes to a new file.
        compress_columns: columns written LZ4-compressed (`output_compress_columns`).
        worker_index: this worker's index (part of every file name).
        actions_normalized: recorded on each line (whether `actions` are the policy's
            normalized actions); None omits it.
    """

    def __init__(self, path: str, *, max_file_size: int = 64 * 1024 * 1024, compress_columns: Iterable[str] = (),
                 worker_index: int = 0, actions_normalized: Optional[bool] = None):
        self.path = os.path.abspath(os.path.expanduser(path))
        self.max_file_size = int(max_file_size)
        self.compress_columns = list(compress_columns)
        self.worker_index = int(worker_index)
        self.actions_normalized = actions_normalized
        self._stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        self._file: Optional[IO[str]] = None
        self._index = 0
        self.files: list = []  # every file written, in order

    def write(self, batch: Union[SampleBatch, MultiAgentBatch]) -> None:
        """Appends `batch` as one line (empty batches are skipped)."""
        if batch.count == 0:
            return
        line = encode_batch(batch, self.compress_columns, self.actions_normalized) + "\n"
        f = self._file if self._file is not None else self._open_next()
        f.write(line)
        f.flush()
        if f.tell() >= self.max_file_size:
            f.close()
            self._file = None

    def _open_next(self) -> IO[str]:
        os.makedirs(self.path, exist_ok=True)
        while True:
            name = os.path.join(self.path, f"output-{self._stamp}_worker-{self.worker_index}_{self._index}.json")
            self._index += 1
            try:  # "x": never append to a file another writer made (e.g. a second run in the same second)
                self._file = open(name, "x", encoding="utf-8")
            except FileExistsError:
                continue
            self.files.append(name)
            return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def records_normalized_actions(config: dict, action_space: Optional[gym.Space]) -> Optional[bool]:
    """Whether the actions a sampler records are normalized (Box actions with
    `normalize_actions`); None when the action space is not a Box (nothing to normalize)."""
    if not isinstance(action_space, gym.spaces.Box):
        return None
    return bool(config.get("normalize_actions", True))


def make_output_writer(config: dict, ioctx) -> Optional[object]:
    """The writer `config["output"]` asks for (None: no output).

    `output` may be None, "logdir" (the trainer's results folder), a folder path, or a
    callable `IOContext -> writer` (an object with `write(batch)`).
    """
    output = config.get("output")
    if output is None:
        return None
    if callable(output):
        return output(ioctx)
    path = ioctx.log_dir if output == "logdir" else output
    if path is None:
        raise ValueError("'output': 'logdir' needs the trainer's results folder, which this worker was not given; "
                         "set 'output' to a folder path")
    worker = ioctx.worker
    space = None
    if worker is not None and len(worker.policy_map) == 1:
        space = next(iter(worker.policy_map.values())).action_space
    return JsonWriter(path, max_file_size=config.get("output_max_file_size", 64 * 1024 * 1024),
                      compress_columns=config.get("output_compress_columns") or (),
                      worker_index=ioctx.worker_index, actions_normalized=records_normalized_actions(config, space))
