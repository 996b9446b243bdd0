"""Checkpoint format migrations: each takes a checkpoint of `format_version` N to N + 1.

Reading a checkpoint (`read_checkpoint`: `Trainer.restore`, `Trainer.from_checkpoint`,
`rlfleet evaluate` and `serve`) applies the migrations from its version up to the current one,
in order, in memory; `rlfleet checkpoint upgrade PATH` writes the result back as a checkpoint
of the current format. A checkpoint of a version no chain of migrations leads from is refused
with the versions this rlfleet reads; one of a newer version than this rlfleet's, with the
advice to upgrade rlfleet (`folder.read_manifest`).

A migration sees the checkpoint's content, not its files: the manifest's entries and the state
tree of state.json with its arrays loaded (NumPy arrays, numbers, strings, lists and dicts).
The envelope (`format`, `format_version`, `files`, `state_index`, `policy_folders`: how the
files are found and checked) is the same in every version and is rewritten on upgrade.

Format history (the spec; a new format adds a row and a migration to it):

| version | written by | what changed                                                   |
| ------- | ---------- | -------------------------------------------------------------- |
| 1       | rlfleet 0.1 | the first format: the layout `rlfleet.checkpoint` describes   |

    @register_migration(1, "policy states keep their optimizer under 'optimizer_states'")
    def _rename_optimizers(manifest, state):
        for policy in state["worker"]["policies"].values():
            policy["optimizer_states"] = policy.pop("optimizers")
        return manifest, state
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

from rlfleet.utils.safe_files import CheckpointError

# Content -> content (manifest entries, state tree); may change its arguments in place.
MigrationFn = Callable[[Dict[str, Any], Dict[str, Any]], Tuple[Dict[str, Any], Dict[str, Any]]]
MIGRATED_FROM = "migrated_from"  # in a migrated manifest (in memory): the version read from disk


@dataclass(frozen=True)
class Migration:
    """One step of the format: `from_version` -> `from_version + 1`.

    Attributes:
        from_version: the format version it reads.
        description: what changed, for `rlfleet checkpoint inspect` / `upgrade`.
        apply: the change (see `MigrationFn`).
    """

    from_version: int
    description: str
    apply: MigrationFn


# from_version -> its migration. Empty while format 1 is the only format there has been.
MIGRATIONS: Dict[int, Migration] = {}


def register_migration(from_version: int, description: str) -> Callable[[MigrationFn], MigrationFn]:
    """Registers the decorated function as the migration from `from_version` to the next.

    Raises:
        ValueError: a migration from that version is already registered, or the version is
            not an int >= 0.
    """
    if not isinstance(from_version, int) or isinstance(from_version, bool) or from_version < 0:
        raise ValueError(f"register_migration: from_version must be an int >= 0, got {from_version!r}")
    if from_version in MIGRATIONS:
        raise ValueError(f"a migration from format version {from_version} is already registered: "
                         f"{MIGRATIONS[from_version].description!r}")

    def register(fn: MigrationFn) -> MigrationFn:
        MIGRATIONS[from_version] = Migration(from_version, description, fn)
        return fn

    return register


def oldest_readable(current: int) -> int:
    """The oldest format version a chain of migrations leads from to `current`."""
    version = current
    while version - 1 in MIGRATIONS:
        version -= 1
    return version


def pending(version: int, current: int) -> List[Migration]:
    """The migrations from `version` to `current`, in order (empty when it is current).

    Raises:
        CheckpointError: no chain of migrations leads from `version` to `current`.
    """
    steps = []
    for v in range(version, current):
        if v not in MIGRATIONS:
            raise CheckpointError(
                f"format version {version} cannot be read: this rlfleet knows no migration from format {v} to "
                f"{v + 1} (it reads format versions {oldest_readable(current)} to {current}). Load it with the "
                "rlfleet version that wrote it, and save it again from there")
        steps.append(MIGRATIONS[v])
    return steps


def migrate(manifest: Dict[str, Any], state: Dict[str, Any], current: int, where: str
            ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The content of a checkpoint of `manifest["format_version"]` as the `current` format
    holds it, the migrations applied in order (the arguments themselves when none is due).
    A migrated manifest records the version read from disk under "migrated_from".

    Raises:
        CheckpointError: naming the checkpoint `where`, when no migration leads to `current`
            or one fails on this checkpoint.
    """
    version = manifest["format_version"]
    try:
        steps = pending(version, current)
    except CheckpointError as exc:
        raise CheckpointError(f"checkpoint {where!r}: {exc}") from None
    if not steps:
        return manifest, state
    manifest, state = copy.deepcopy(manifest), copy.deepcopy(state)
    for step in steps:
        try:
            manifest, state = step.apply(manifest, state)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CheckpointError(
                f"checkpoint {where!r} of format version {version} could not be migrated from format "
                f"{step.from_version} to {step.from_version + 1} ({step.description}): "
                f"{type(exc).__name__}: {exc}. The checkpoint is unchanged on disk") from exc
        manifest["format_version"] = step.from_version + 1
    manifest[MIGRATED_FROM] = version
    return manifest, state
