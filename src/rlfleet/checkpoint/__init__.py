"""Trainer checkpoints: a folder of JSON and safetensors files that loading never executes.

    checkpoint_<iteration>/
      manifest.json                              format and rlfleet version, algorithm,
                                                 iteration, counters, resume seed, config,
                                                 the SHA-256 and size of every other file
      state.json                                 the rest of the trainer's state
                                                 (`Trainer.get_state()`: the local worker's
                                                 state, replay buffers) with every array
                                                 replaced by {"__array__": {file, key}}:
                                                 policy counters, exploration, optimizer
                                                 hyperparameters, NumPy RNG states, filters
      policies/<policy_id>/weights.safetensors   the model's state_dict
      policies/<policy_id>/state.safetensors     optimizer moments and steps, torch RNG state
      filters.safetensors                        observation-filter statistics
      replay_buffers/<policy_id>.safetensors     with `store_buffer_in_checkpoints` only: each
                                                 trained policy's replay buffer (checkpoints
                                                 of older versions may hold the default
                                                 policy's as replay_buffer.safetensors)

The modules: `folder` (the folder format: write atomically, verify on load, list, prune),
`trainer_io` (a trainer's state to and from a folder) and `import_gate` (what
`Trainer.from_checkpoint` may import: a security boundary, kept apart so it can be read and
reviewed alone). Everything is re-exported here. Across versions: `migrations` (format N ->
N + 1, applied on load), `upgrade` and `summary` (`rlfleet checkpoint upgrade` / `inspect`).
"""
from __future__ import annotations

from rlfleet.checkpoint.folder import (
    FORMAT_VERSION,
    Checkpoint,
    join_arrays,
    list_checkpoints,
    prune_checkpoints,
    read_checkpoint,
    read_manifest,
    split_arrays,
    write_checkpoint,
)
from rlfleet.checkpoint.trainer_io import restore_trainer, save_trainer, trainer_from_checkpoint, trainer_state
from rlfleet.utils.safe_files import CheckpointError, CheckpointSaveError, check_weights_fit


__all__ = [
    "CheckpointError", "CheckpointSaveError", "Checkpoint", "FORMAT_VERSION", "read_checkpoint", "read_manifest",
    "write_checkpoint",
    "list_checkpoints", "prune_checkpoints", "save_trainer", "restore_trainer", "trainer_from_checkpoint",
    "trainer_state",
    "check_weights_fit", "split_arrays", "join_arrays",
]
