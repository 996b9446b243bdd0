"""`TensorBatch`: a train batch's loss columns as tensors, with the layout the learning loop
needs carried along (what `TorchPolicy.to_tensors` returns).

A recurrent policy's rows are cut into padded sequences (`rnn_sequencing.pad_batch_to_sequences`):
its row columns are `[S, T, ...]` (plus `state_in_k` `[S, ...]`, `seq_lens` `[S]` and `seq_mask`
`[S, T]`). Minibatches take whole sequences (`take`), and the loss sees the row columns flattened
back to `[S * T, ...]` (`flat_rows`). Feed-forward batches have no row columns: `flat_rows` is
the identity. A plain dict (a subclass's own `to_tensors`, e.g. replayed sequences laid out as
the loss reads them) is taken as it is.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Tuple

import numpy as np
import torch

from rlfleet.policy.rnn_sequencing import SEQ_MASK, pad_batch_to_sequences
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.compression import decompress_columns


class TensorBatch(dict):
    """`{column: tensor}` plus `row_columns`: the columns laid out `[S, T, ...]` that the loss
    reads flattened (empty when the batch is not cut into sequences). Slices and device
    copies keep the layout.

    Args:
        columns: the columns (tensors, or arrays indexed the same way).
        row_columns: the `[S, T, ...]` columns.
    """

    def __init__(self, columns: Mapping[str, Any], row_columns: Tuple[str, ...] = ()):
        super().__init__(columns)
        self.row_columns = tuple(row_columns)

    def take(self, index: Any) -> "TensorBatch":
        """Rows (sequences, for a padded batch) `index` of every column: a slice or indices."""
        return TensorBatch({k: v[index] for k, v in self.items()}, self.row_columns)

    def to(self, device: torch.device) -> "TensorBatch":
        """Every column on `device` (`to_device`)."""
        return TensorBatch({k: to_device(v, device) for k, v in self.items()}, self.row_columns)


def flat_rows(tensors: Mapping[str, Any]) -> Dict[str, Any]:
    """The columns as the loss reads them: row columns of a `TensorBatch` flattened from
    `[S, T, ...]` to `[S * T, ...]`; anything else as it is."""
    if not isinstance(tensors, TensorBatch) or not tensors.row_columns:
        return tensors
    rows = tensors.row_columns
    return {k: v.reshape(-1, *v.shape[2:]) if k in rows else v for k, v in tensors.items()}


def take_rows(columns: Mapping[str, Any], index: Any) -> Mapping[str, Any]:
    """Rows `index` of every column; a `TensorBatch` keeps its layout."""
    if isinstance(columns, TensorBatch):
        return columns.take(index)
    return {k: v[index] for k, v in columns.items()}


def batch_tensors(batch: SampleBatch, columns: Iterable[str], device: torch.device, owner: str,
                  seq_len: int = 0, num_state_tensors: int = 0) -> TensorBatch:
    """`columns` of `batch` as tensors on `device`, converted once per train batch (never per
    minibatch); cut into padded sequences of `seq_len` steps when `seq_len` > 0.

    Raises:
        ValueError: naming `owner` (the policy class), the missing columns and those present.
    """
    columns = list(columns)
    batch = decompress_columns(batch, columns)  # compress_observations: once per train batch
    missing = [c for c in columns if c not in batch]
    if missing:
        raise ValueError(f"{owner} needs batch columns {missing}; got {sorted(batch.keys())}")
    if seq_len:
        padded = pad_batch_to_sequences(batch, seq_len, columns, num_state_tensors)
        return TensorBatch({k: to_device(as_tensor(v), device) for k, v in padded.items()},
                           tuple(columns) + (SEQ_MASK,))
    return TensorBatch({c: to_device(as_tensor(batch[c]), device) for c in columns})


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` on `device`; a CPU tensor bound for a GPU goes through pinned memory
    (asynchronous copy). A no-op on the same device."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def as_tensor(column: Any) -> torch.Tensor:
    """A column as a tensor, sharing its memory; read-only arrays (batches that came through
    Ray's object store) are copied first: torch cannot wrap them without a warning."""
    if isinstance(column, np.ndarray) and not column.flags.writeable:
        column = column.copy()
    return torch.as_tensor(column)


__all__ = ["TensorBatch", "as_tensor", "batch_tensors", "flat_rows", "take_rows", "to_device"]
