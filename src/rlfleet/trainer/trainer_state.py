"""The Trainer's state and checkpoints: `get_state()` / `set_state()` (what a resume needs),
and saving and restoring them as a checkpoint (file format: `rlfleet/checkpoint/`), under
its own names and under Tune's.

A base class of `Trainer`, in its own module for size; it reaches the workers through the
trainer's `workers` (a `WorkerSet`), `evaluator`, `callbacks`, `counters` and `config`.
"""
from __future__ import annotations

import logging
import os
import secrets
from typing import Any, Dict, Optional

from rlfleet.trainer.fault_tolerance import run_with_recovery
from rlfleet.utils.safe_files import CheckpointError
from rlfleet.utils.seeding import derive_seed

logger = logging.getLogger(__name__)


class TrainerState:
    """State, checkpoints and pickling: everything `Trainer` saves and restores."""

    def get_state(self) -> Dict[str, Any]:
        """Everything a resume needs, as nested dicts of NumPy arrays and JSON scalars:
        `algorithm`, `iteration`, `counters`, `episodes_total`, `episode_window` (the
        finished episodes the smoothed episode statistics are taken over), `time_total_s`,
        `resume_seed` (envs restart from it after `set_state`) and `worker`: the local worker's state
        (policies with their optimizers and RNG states, filters, sampler); `callbacks` when
        the callbacks' `get_state()` holds something."""
        seed = self.config.get("seed")
        state = {
            "algorithm": self._name,
            "iteration": int(self.iteration),
            "counters": {k: int(v) for k, v in self.counters.items()},
            "episodes_total": int(self._episodes.total),
            "episode_window": self._episodes.get_state(),
            "time_total_s": float(self._time_total),
            "resume_seed": derive_seed(seed, "resume", self.iteration) if seed is not None else secrets.randbits(63),
            "worker": self.workers.local_worker().get_state(),
            "sample_ledger": self.workers.received.get_state(self.samples_queued()),
        }
        callbacks_state = self.callbacks.get_state()
        if callbacks_state:  # e.g. a self-play league's snapshots (rlfleet/league)
            state["callbacks"] = callbacks_state
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        """Applies `get_state()` output on every worker (evaluation workers without the RNG
        states); episodes in flight restart, seeded from `resume_seed`.

        Raises:
            ValueError: before anything changes, when the state is of another algorithm or
                holds a policy this trainer lacks or weights that do not fit.
        """
        if "callbacks" in state:  # first: they may add policies the worker state holds (league snapshots)
            self.callbacks.set_state(trainer=self, state=state["callbacks"])
        self._check_state_fits(state)
        seed = state.get("resume_seed")
        worker_state = dict(state["worker"], restart_episodes=seed if isinstance(seed, int) else None)
        # Remote workers get the same state: each derives its own RNG streams and env seeds
        # from it and its worker index.
        self.workers.foreach_worker(lambda w: w.set_state(worker_state))
        self.evaluator.set_worker_state(worker_state)
        self.iteration = int(state["iteration"])
        self.counters.update({k: int(v) for k, v in (state.get("counters") or {}).items()})
        # Checkpoints written before the window was kept restart it empty.
        self._episodes.set_state(state.get("episode_window") or [], total=int(state.get("episodes_total", 0)))
        self._time_total = float(state.get("time_total_s", 0.0))
        if "sample_ledger" in state:  # absent from checkpoints written before it existed
            self.workers.received.set_state(state["sample_ledger"])

    # --- sample accounting (rlfleet/rollout/sample_counters.py) --------------------------
    # Trainers whose learner takes samples in its own time (a learner thread, replay shards)
    # record what it trained themselves; for the others a finished training step has learned
    # on (or stored) every step the driver received during it.
    records_own_training = False

    def samples_queued(self) -> int:
        """Env steps the driver received and has not trained on yet (0: none are kept
        between training steps)."""
        return 0

    def sample_ledger(self) -> Dict[str, Any]:
        """The driver's sample books (`ReceivedLedger.snapshot`): received, trained, queued,
        dropped; reported as `info/sample_ledger` every iteration."""
        return self.workers.received.snapshot(self.samples_queued())

    def _untrained(self) -> int:
        ledger = self.workers.received
        return ledger.total_received() - ledger.trained - sum(ledger.dropped.values())

    def _account_trained_step(self) -> None:
        if not self.records_own_training:
            self.workers.received.record_trained(self._untrained())

    def _undo_failed_iteration(self, iteration_before: int) -> None:
        """A remote worker failed during the iteration, which runs again: the steps a cut-off
        synchronous training step had received are dropped."""
        self.iteration = iteration_before
        if not self.records_own_training:
            self.workers.received.record_dropped("worker_failure", self._untrained())

    def _check_state_fits(self, state: Dict[str, Any]) -> None:
        algo = state.get("algorithm")
        if algo != self._name:
            raise ValueError(f"it was written by a {algo} trainer and cannot be restored into a {self._name} "
                             f"trainer; use Trainer.from_checkpoint(path) to rebuild a {algo} trainer")
        self.workers.local_worker().check_state_fits(state["worker"])

    def save(self, checkpoint_dir: Optional[str] = None, *, keep_checkpoints_num: Optional[int] = None,
             continue_from_checkpoint: bool = False) -> str:
        """Writes `get_state()` as a checkpoint folder `<checkpoint_dir or logdir>/checkpoint_<iteration>/`
        atomically (JSON + safetensors; loading it never runs code).

        Args:
            checkpoint_dir: the parent folder (default: this trainer's `logdir`).
            keep_checkpoints_num: afterwards delete all but this many newest checkpoints there.
            continue_from_checkpoint: afterwards go on from the checkpoint as read back, exactly
                as a run resumed from it would (`set_state`: episodes in flight restart, seeded
                from it; remote workers derive their RNG streams from it), so that a run
                resumed from this checkpoint repeats this one bit for bit. `rlfleet train`
                saves so.

        Returns:
            The checkpoint folder's path.
        """
        from rlfleet.checkpoint import read_checkpoint, save_trainer, trainer_state

        path = save_trainer(self, checkpoint_dir, keep_checkpoints_num)
        if continue_from_checkpoint:
            state = trainer_state(read_checkpoint(path))
            # Every worker takes the state; one that died meanwhile is replaced (or dropped) as
            # in train(), and the state applied again, instead of ending the run at a checkpoint.
            run_with_recovery(lambda: self.set_state(state), self.config, recover=self._try_recover, undo=lambda: None)
        return path

    def restore(self, checkpoint_path: Any) -> None:
        """Restores weights, optimizer, filters, RNG states, counters and the iteration from a
        checkpoint of the same algorithm (its folder, or a folder or Ray Tune `Checkpoint`
        holding one), on every worker (`set_state`); episodes in flight restart.

        A checkpoint of this trainer's own results folder (`logdir`) rewinds its logs to the
        checkpoint's iteration (`rewind_logs`), so that a run resumed in its folder logs each
        iteration once: `PPOTrainer(config, logdir=run_dir).restore(run_dir)`.

        Args:
            checkpoint_path: a checkpoint folder (or a Ray Tune `Checkpoint` of one), or a run
                folder holding `checkpoint_<n>/`
                folders: its newest intact checkpoint (newer damaged ones are skipped with a
                warning naming them).

        Raises:
            CheckpointError: a missing, corrupted, newer-format or non-fitting checkpoint, or
                a run folder without an intact one.
        """
        from rlfleet.checkpoint import restore_trainer
        from rlfleet.checkpoint.located import checkpoint_folder, is_tune_checkpoint
        from rlfleet.checkpoint.newest import is_checkpoint_folder, newest_intact_checkpoint

        # A Ray Tune `Checkpoint` (2.x's results.get_best_result().checkpoint) names a folder
        # but refuses os.fspath: its rlfleet checkpoint folder is looked up.
        path = checkpoint_folder(checkpoint_path) if is_tune_checkpoint(checkpoint_path) else os.fspath(checkpoint_path)
        if os.path.isdir(path) and not is_checkpoint_folder(path):
            found = newest_intact_checkpoint(path)
            for skipped, why in found.skipped:
                logger.warning("Skipping the damaged checkpoint %s: %s", skipped, why)
            if found.checkpoint is not None:
                restore_trainer(self, found.checkpoint.path, found.checkpoint)
                return
            if found.skipped:
                raise CheckpointError(f"{path!r} holds no intact checkpoint: "
                                      + "; ".join(f"{p}: {why}" for p, why in found.skipped))
        restore_trainer(self, path)

    def rewind_logs(self, iteration: int) -> Dict[str, int]:
        """Drops the records after `iteration` from this run's result.json, progress.csv and
        TensorBoard files (see `rlfleet.results.rewind`); returns the records dropped per file."""
        from rlfleet.results.rewind import rewind_logs

        return rewind_logs(self.logdir, iteration).dropped

    def save_to_object(self) -> bytes:
        """The checkpoint `save()` writes, as bytes (a ZIP of the folder: JSON + safetensors, no
        pickle), e.g. to send to another process; see `rlfleet.checkpoint.archive`."""
        from rlfleet.checkpoint.archive import checkpoint_to_bytes

        return checkpoint_to_bytes(self)

    def restore_from_object(self, obj: bytes) -> None:
        """Restores from the bytes of `save_to_object()`, with the checks `restore()` makes.

        Raises:
            CheckpointError: bytes that are not such a checkpoint, or one that does not fit.
        """
        from rlfleet.checkpoint.archive import restore_from_bytes

        restore_from_bytes(self, obj)

    # --- Tune's names, and pickling ------------------------------------------------------
    def save_checkpoint(self, checkpoint_dir: str) -> str:
        """Tune's name for `save(checkpoint_dir)`."""
        return self.save(checkpoint_dir)

    def load_checkpoint(self, checkpoint_path: str) -> None:
        """Tune's name for `restore(checkpoint_path)`."""
        self.restore(checkpoint_path)

    def __getstate__(self) -> Dict[str, Any]:
        """`get_state()`: arrays and JSON scalars only (what Tune's actor reuse moves);
        live objects (workers, envs, files) are never pickled."""
        return self.get_state()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Applies a `__getstate__` state to this (built) trainer."""
        if "workers" not in self.__dict__:
            raise TypeError("A Trainer is rebuilt from its config, not unpickled: build it, then call "
                            "set_state(state) (or use Trainer.from_checkpoint)")
        self.set_state(state)
