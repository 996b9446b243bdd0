"""A trainer's state to and from a checkpoint folder: `Trainer.save`, `Trainer.restore`,
`Trainer.from_checkpoint`.

The trainer owns what its state holds (`Trainer.get_state` / `set_state`); this module maps
that state to the folder (`rlfleet.checkpoint.folder`) and rebuilds a trainer's config
through the import-trust gate (`rlfleet.checkpoint.import_gate`). It never imports the
trainer: `Trainer` passes itself in.
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from rlfleet.checkpoint.folder import Checkpoint, prune_checkpoints, read_checkpoint, write_checkpoint
from rlfleet.checkpoint.import_gate import decode_trusted_config
from rlfleet.checkpoint.located import checkpoint_folder
from rlfleet.utils.json_codec import encode, qualified_name
from rlfleet.utils.safe_files import CheckpointError
from rlfleet.utils.versions import software_versions


# The trainer-state entries (see `Trainer.get_state`) the manifest holds; every other entry
# goes to state.json, its arrays to safetensors files.
_MANIFEST_STATE_KEYS = ("algorithm", "iteration", "counters", "episodes_total", "time_total_s", "resume_seed")


def _split_state(state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A trainer state as (manifest entries, state.json tree)."""
    head = {k: state[k] for k in _MANIFEST_STATE_KEYS if k in state}
    return head, {k: v for k, v in state.items() if k not in _MANIFEST_STATE_KEYS}


def _space_text(space: Any) -> str:
    """A space as one line of text (NumPy pads the bounds of a Box with runs of spaces)."""
    return " ".join(repr(space).split())


def trainer_state(ck: Checkpoint) -> Dict[str, Any]:
    """The trainer state (`Trainer.set_state` input) a checkpoint holds."""
    # Deferred: rlfleet.policy imports torch, which reading a checkpoint's JSON (`rlfleet
    # checkpoint inspect`) does without.
    from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID

    state = {k: ck.manifest[k] for k in _MANIFEST_STATE_KEYS if k in ck.manifest}
    state.update(ck.state)
    # Checkpoints written before buffers were kept per policy hold the default policy's
    # buffer apart, as "replay_buffer".
    if "replay_buffer" in state:
        state["replay_buffers"] = {DEFAULT_POLICY_ID: state.pop("replay_buffer"), **(state.get("replay_buffers") or {})}
    return state


def save_trainer(trainer, checkpoint_dir: Optional[str] = None, keep_checkpoints_num: Optional[int] = None, *,
                 path: Optional[str] = None) -> str:
    """Writes `trainer.get_state()` to `<checkpoint_dir or trainer.logdir>/checkpoint_<iteration>/`
    (or to the folder `path` itself: `Trainer.save_to_path`); see `Trainer.save`."""
    state = trainer.get_state()
    parent = os.path.abspath(checkpoint_dir or trainer.logdir)
    path = os.path.abspath(path) if path else os.path.join(parent, f"checkpoint_{int(state['iteration'])}")
    head, body = _split_state(state)
    versions = software_versions()
    manifest = {
        "rlfleet_version": versions["rlfleet"],
        "versions": versions,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "trainer_class": qualified_name(type(trainer)),
        **head,
        "policies": {
            pid: {"policy_class": qualified_name(type(policy)),
                  # As text, for `rlfleet checkpoint inspect` (which reads them without Gymnasium).
                  "observation_space": _space_text(policy.observation_space),
                  "action_space": _space_text(policy.action_space),
                  "weights": {k: list(np.shape(v)) for k, v in pstate["weights"].items()}}
            for pid, pstate in body["worker"]["policies"].items() for policy in (trainer.get_policy(pid),)
        },
        "config": encode(trainer.config),
        "user_config": encode(trainer.user_config()),
    }
    write_checkpoint(path, manifest, body)
    if keep_checkpoints_num is not None:
        prune_checkpoints(parent, keep_checkpoints_num, protect=path)
    return path


def restore_trainer(trainer, path: Any, checkpoint: Optional[Checkpoint] = None) -> None:
    """Reads, verifies and applies (`trainer.set_state`) the checkpoint at `path` (a folder, or
    a folder or Ray Tune `Checkpoint` holding one, as `trainer_from_checkpoint` takes), or the
    one already read, `checkpoint`; see `Trainer.restore`. Nothing changes when the checkpoint
    is damaged or does not fit. One of the trainer's own results folder rewinds its logs."""
    ck = checkpoint or read_checkpoint(checkpoint_folder(path))
    try:
        trainer.set_state(trainer_state(ck))
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"checkpoint {ck.path!r} does not fit this trainer: {exc}") from exc
    # A checkpoint of the trainer's own run folder: the run goes back to its iteration, and so
    # do the logs (the iterations after it will be logged again).
    if _same_folder(os.path.dirname(os.path.abspath(ck.path)), trainer.logdir):
        trainer.rewind_logs(int(ck.manifest["iteration"]))


def _same_folder(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False



def trainer_from_checkpoint(cls: type, algorithm: Optional[str], path: Any, config_overrides: Optional[dict] = None,
                            trusted_modules: Optional[Sequence[str]] = None, *, trainer_base: type, **trainer_kwargs):
    """Builds a trainer from the manifest alone and restores it; see `Trainer.from_checkpoint`.

    Args:
        cls: the class `from_checkpoint` was called on.
        path: the checkpoint folder, or a folder or Ray Tune `Checkpoint` holding one (see
            `rlfleet.checkpoint.located`), or a `Checkpoint` already read.
        algorithm: its algorithm name; None (the base class): the checkpoint's algorithm,
            looked up in the registry.
        trusted_modules: modules (packages) whose recorded classes and functions may be
            imported, besides rlfleet, gymnasium and the user's modules already imported.
        trainer_base: `Trainer` (never accepted as a config value; see `import_gate`).
    """
    ck = path if isinstance(path, Checkpoint) else read_checkpoint(checkpoint_folder(path))
    algo = ck.manifest["algorithm"]
    trainer_cls = cls
    if algorithm is None:
        from rlfleet.registry import get_trainer_class

        try:
            trainer_cls = get_trainer_class(algo)
        except ValueError as exc:
            raise CheckpointError(f"checkpoint {ck.path!r} is of algorithm {algo!r}, which is not registered "
                                  f"({exc}); call YourTrainer.from_checkpoint(path) on its class") from None
    elif algorithm != algo:
        raise CheckpointError(
            f"checkpoint {ck.path!r} was written by a {algo} trainer; {cls.__name__}.from_checkpoint cannot "
            f"load it (use Trainer.from_checkpoint(path), which picks the algorithm from the checkpoint)")
    recorded = ck.manifest.get("user_config")
    if not isinstance(recorded, dict):
        raise CheckpointError(f"checkpoint {ck.path!r} records no config to rebuild the trainer from")
    overrides = dict(config_overrides or {})
    config = decode_trusted_config(recorded, overrides, trusted_modules, ck.path, trainer_base)
    try:
        trainer = trainer_cls(config=config, **trainer_kwargs)
    except ValueError as exc:
        if "env=" in str(exc) and "unknown" in str(exc):
            raise CheckpointError(
                f"Trainer.from_checkpoint({ck.path!r}): config key 'env' ({config.get('env')!r}) cannot be "
                f"resolved in this process: {exc}. Register it with register_env(...) first, or pass "
                "config_overrides={'env': ...}") from None
        raise
    try:
        restore_trainer(trainer, ck.path, ck)
    except BaseException:
        trainer.stop()
        raise
    return trainer
