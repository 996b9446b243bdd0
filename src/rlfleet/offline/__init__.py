"""Offline data: write sampled batches as JSON lines, read them back as a worker's sampler,
estimate a policy's return from logged data (see json_format.py for the file format)."""
from rlfleet.offline.io_context import IOContext
from rlfleet.offline.json_format import OfflineDataError, decode_line, encode_batch
from rlfleet.offline.readers import JsonReader, MixedInput, ShuffledInput, expand_files, register_input
from rlfleet.offline.writer import JsonWriter

__all__ = ["IOContext", "JsonReader", "JsonWriter", "MixedInput", "OfflineDataError", "ShuffledInput",
           "decode_line", "encode_batch", "expand_files", "register_input"]
