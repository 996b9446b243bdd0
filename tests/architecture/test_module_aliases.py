"""Moved modules keep their old import paths (rlfleet/module_aliases.py), and configs and
checkpoints that name a class by its old path load as before.

Lines that spell an old path on purpose carry the marker `old module path: kept`, so that the
import rewrite that follows a move leaves them alone.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlfleet.module_aliases import MOVED, lazy_exports
from tests.helpers import REPO_ROOT

SRC = REPO_ROOT / "src"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_itself(old):
    new = MOVED[old]
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new  # its own spec, not the alias's
    assert sys.modules[old] is module
    # No file is left at the old place: the table is the only trace of the move.
    old_file = SRC.joinpath(*old.split("."))
    assert not old_file.with_suffix(".py").exists() and not old_file.is_dir()


def test_old_paths_work_in_every_import_form():
    from rlfleet.algorithms.off_policy import OffPolicyTrainer  # old module path: kept
    from rlfleet.algorithms.common.off_policy import OffPolicyTrainer as Moved
    from rlfleet import logger  # old module path: kept
    import rlfleet.results.logger

    assert OffPolicyTrainer is Moved and logger is rlfleet.results.logger
    assert importlib.import_module("rlfleet.algorithms.maddpg").example_envs  # the parent's attribute, once imported


def test_an_unknown_module_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rlfleet.no_such_module")


def test_the_finder_is_installed_once_by_import_rlfleet():
    code = ("import sys, rlfleet, rlfleet.module_aliases as m; m.install(); "
            "print(sum(type(f).__name__ == '_MovedModuleFinder' for f in sys.meta_path), 'torch' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["1", "False"]


def test_lazy_exports_load_on_first_use_and_name_unknown_attributes():
    getattr_ = lazy_exports("rlfleet.trainer", {"Trainer": ("rlfleet.trainer.trainer", "Trainer")})
    from rlfleet.trainer.trainer import Trainer

    assert getattr_("Trainer") is Trainer
    with pytest.raises(AttributeError, match="'rlfleet.trainer' has no attribute 'Nope'"):
        getattr_("Nope")


def test_old_logger_paths_still_name_built_in_loggers(tmp_path):
    from rlfleet.algorithms.pg import PGTrainer

    config = {"num_workers": 0, "train_batch_size": 50, "rollout_fragment_length": 50,
              "logger_config": {"type": "rlfleet.logger.CSVLogger"}}  # old module path: kept
    trainer = PGTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path))
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert (tmp_path / "progress.csv").exists()


def test_a_checkpoint_naming_classes_by_their_old_paths_loads(tmp_path):
    from rlfleet.algorithms.pg import PGTrainer
    from rlfleet.env.examples.maddpg_envs import MatchTargetEnv
    from rlfleet.results.logger import CSVLogger
    from rlfleet.trainer import Trainer

    config = {"num_workers": 0, "train_batch_size": 32, "rollout_fragment_length": 32, "seed": 0,
              "logger_config": {"type": CSVLogger}}
    trainer = PGTrainer(env=MatchTargetEnv, config=config, logdir=str(tmp_path / "run"))
    try:
        trainer.train()
        path = trainer.save(str(tmp_path / "ck"))
    finally:
        trainer.stop()
    manifest_path = os.path.join(path, "manifest.json")
    text = open(manifest_path).read()
    # What a checkpoint written before the move holds: the classes under their old paths.
    olds = {"rlfleet.env.examples.maddpg_envs:": "rlfleet.algorithms.maddpg.example_envs:",  # old module path: kept
            "rlfleet.results.logger:": "rlfleet.logger:"}  # old module path: kept
    for new, old in olds.items():
        assert new in text
        text = text.replace(new, old)
    json.loads(text)
    with open(manifest_path, "w") as f:
        f.write(text)

    restored = Trainer.from_checkpoint(path, logdir=str(tmp_path / "restored"))
    try:
        assert type(restored) is PGTrainer and restored.iteration == 1
        assert restored.user_config()["env"] is MatchTargetEnv
        assert restored.config["logger_config"]["type"] is CSVLogger
        restored.train()
    finally:
        restored.stop()
