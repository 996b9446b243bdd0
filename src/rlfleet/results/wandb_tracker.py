"""Weights & Biases tracking (`pip install 'rlfleet[wandb]'`): the config as the run's
config, every result's numbers as its history at step `timesteps_total`, checkpoints as
artifacts of type "model".

    rlfleet train --run PPO --env CartPole-v1 --config '{"logger_config": {"type": ["JsonLogger",
        "CSVLogger", "TBXLogger", "WandbLogger"], "wandb": {"project": "cartpole"}}}'

Offline unless the user logged in: the `mode` option, else `$WANDB_MODE` (W&B reads it
itself), else "online" when an API key is at hand (`$WANDB_API_KEY`, or the `~/.netrc` entry
that `wandb login` writes), else "offline". An offline run is written under
`<run folder>/wandb/offline-run-*` and uploaded later with `wandb sync` (see
https://docs.wandb.ai/guides/technical-faq/setup/#can-i-run-wandb-offline).
"""
from __future__ import annotations

import netrc
import os
import re
from typing import Any, Dict, Mapping, Optional
from urllib.parse import urlparse

from rlfleet.results.trackers import Tracker, TrackerLogger, import_tracker

WANDB_OPTIONS: Dict[str, str] = {
    "project": "the W&B project (default 'rlfleet')",
    "entity": "the W&B team or user (default: yours)",
    "group": "a group name, e.g. one per grid point",
    "name": "the run's name (default: the run folder's name)",
    "tags": "a list of tags",
    "mode": "'online', 'offline' or 'disabled' (default: offline unless logged in)",
    "dir": "where W&B writes its files (default: the run folder)",
    "log_checkpoints": "log checkpoint folders as artifacts (default True)",
}
_MODES = ("online", "offline", "disabled")
_ARTIFACT_NAME = re.compile(r"[^A-Za-z0-9._-]+")  # W&B's characters for artifact names


def logged_in() -> bool:
    """Whether W&B has an API key here (`$WANDB_API_KEY`, or `wandb login`'s ~/.netrc entry)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def default_mode(options: Mapping[str, Any]) -> Optional[str]:
    """The mode a run starts in (None: W&B's own, from `$WANDB_MODE`).

    Raises:
        ValueError: naming the option when `mode` is not one of W&B's modes.
    """
    mode = options.get("mode")
    if mode is not None:
        if mode not in _MODES:
            raise ValueError(f"logger_config.wandb.mode: {mode!r} is not a W&B mode; give one of {', '.join(_MODES)}")
        return mode
    if os.environ.get("WANDB_MODE"):
        return None
    return "online" if logged_in() else "offline"


class WandbTracker(Tracker):
    """One W&B run (see the module's docstring for `options`)."""

    def __init__(self, options: Mapping[str, Any], run_dir: str):
        self.wandb = import_tracker("wandb", "wandb", "Weights & Biases tracking")
        self.options = dict(options)
        self.mode = default_mode(options)
        self.dir = os.path.expanduser(options.get("dir") or run_dir)
        self.run: Any = None

    def start(self, name: str, config: Mapping[str, Any]) -> None:
        os.makedirs(self.dir, exist_ok=True)
        # "create_new": each Tune trial tracked from one driver is a run of its own
        # (https://docs.wandb.ai/guides/runs/multiple-runs-per-process/).
        self.run = self.wandb.init(
            project=self.options.get("project") or "rlfleet", entity=self.options.get("entity"),
            group=self.options.get("group"), name=self.options.get("name") or name, tags=self.options.get("tags"),
            dir=self.dir, config=dict(config), mode=self.mode, reinit="create_new")

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        # W&B wants steps that never go down; `timesteps_total` only grows within a run.
        self.run.log(dict(metrics), step=step)

    def log_checkpoint(self, path: str) -> None:
        base = os.path.basename(os.path.normpath(path))
        artifact = self.wandb.Artifact(_ARTIFACT_NAME.sub("_", f"{self.run.name}-{base}"), type="model")
        artifact.add_dir(path)
        self.run.log_artifact(artifact)

    def finish(self, failed: bool = False) -> None:
        if self.run is not None:
            self.run.finish(exit_code=1 if failed else 0)
            self.run = None


class WandbLogger(TrackerLogger):
    """`logger_config: {"type": [..., "WandbLogger"], "wandb": {options}}`: one W&B run per
    rlfleet run (options: see `WANDB_OPTIONS`)."""

    option_key = "wandb"
    OPTIONS = WANDB_OPTIONS

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        import_tracker("wandb", "wandb", "logger_config type 'WandbLogger'")  # fail before training starts
        default_mode(self.options)  # a bad mode fails here too

    def make_tracker(self, options: Mapping[str, Any], run_dir: str) -> Tracker:
        return WandbTracker(options, run_dir)


__all__ = ["WANDB_OPTIONS", "WandbLogger", "WandbTracker", "default_mode", "logged_in"]
