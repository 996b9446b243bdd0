"""LZ4 compression of observation columns (`compress_observations`), without pickle.

A compressed column is an ordinary 1-D NumPy array of fixed-width bytes (dtype ``S<w>``),
one element per row, so `SampleBatch` concat / slice / take / shuffle and the replay
buffers handle it like any other column (NumPy widens ``S`` columns on concatenation).
Each element is self-describing:

    uint32 payload length | uint8 dtype char | uint8 ndim | ndim x uint32 dims | LZ4 block

padded with zero bytes to the column width. Elements are always read through a
``uint8`` view of the column: indexing an ``S`` array would strip trailing zero bytes.
"""
from __future__ import annotations

import struct
from typing import Iterable, Mapping, Optional

import lz4.block
import numpy as np

COMPRESSED_COLUMNS = ("obs", "new_obs")

_HEAD = struct.Struct("<IBB")  # payload length, dtype char, ndim
_DIM = struct.Struct("<I")


def is_compressed(column: np.ndarray) -> bool:
    """True for a column made by `compress` (1-D fixed-width bytes)."""
    return isinstance(column, np.ndarray) and column.dtype.kind == "S" and column.ndim == 1


def compress(array: np.ndarray) -> np.ndarray:
    """LZ4-compresses each row of `array` into one element of a fixed-width bytes column.

    Args:
        array: rows of any numeric dtype and shape `[N, ...]`.

    Returns:
        A 1-D array of dtype ``S<w>`` with N elements (`decompress` inverts it exactly).
    """
    array = np.ascontiguousarray(array)
    row_shape, dtype = array.shape[1:], array.dtype
    if dtype.kind not in "biuf" or len(dtype.char) != 1:
        raise ValueError(f"compress: rows must be numeric, got dtype {dtype}")
    dims = b"".join(_DIM.pack(d) for d in row_shape)
    head_len = _HEAD.size + len(dims)
    payloads = [lz4.block.compress(row.tobytes(), store_size=False) for row in array]
    out = np.zeros((len(payloads), head_len + max((len(p) for p in payloads), default=0)), np.uint8)
    for i, payload in enumerate(payloads):
        head = _HEAD.pack(len(payload), ord(dtype.char), len(row_shape)) + dims
        out[i, :head_len + len(payload)] = np.frombuffer(head + payload, np.uint8)
    return out.view(f"S{out.shape[1]}").reshape(len(payloads))


def decompress(column: np.ndarray) -> np.ndarray:
    """The rows `compress` packed, as one `[N, ...]` array of the original dtype."""
    n = len(column)
    if n == 0:
        raise ValueError("decompress: an empty column carries no row shape")
    raw = np.ascontiguousarray(column).view(np.uint8).reshape(n, column.dtype.itemsize)
    _, char, ndim = _HEAD.unpack_from(raw[0].tobytes())
    dtype = np.dtype(chr(char))
    shape = tuple(_DIM.unpack_from(raw[0].tobytes(), _HEAD.size + 4 * k)[0] for k in range(ndim))
    head_len = _HEAD.size + 4 * ndim
    row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    out = np.empty((n, *shape), dtype)
    flat = out.reshape(n, -1).view(np.uint8) if row_bytes else None
    for i in range(n):
        length = _HEAD.unpack_from(raw[i].tobytes(), 0)[0]
        data = lz4.block.decompress(raw[i, head_len:head_len + length].tobytes(), uncompressed_size=row_bytes)
        if flat is not None:
            flat[i] = np.frombuffer(data, np.uint8)
    return out


def compress_columns(batch: dict, columns: Iterable[str] = COMPRESSED_COLUMNS) -> dict:
    """Compresses `columns` of `batch` in place (those present and not yet compressed)."""
    for key in columns:
        if key in batch and not is_compressed(batch[key]) and len(batch[key]):
            batch[key] = compress(batch[key])
    return batch


def decompress_columns(batch: Mapping, columns: Optional[Iterable[str]] = None) -> dict:
    """`batch` with every compressed column (of `columns`, default all) decompressed.

    Returns the same object when nothing is compressed; otherwise a shallow copy of the
    same type, so the caller's batch keeps its compact form.
    """
    keys = [k for k in (batch.keys() if columns is None else columns)
            if k in batch and is_compressed(batch[k]) and len(batch[k])]
    if not keys:
        return batch
    out = type(batch)(batch)
    for key in keys:
        out[key] = decompress(batch[key])
    return out


__all__ = ["COMPRESSED_COLUMNS", "compress", "compress_columns", "decompress", "decompress_columns",
           "is_compressed"]
