"""Loading a checkpoint never runs code it names: `Trainer.from_checkpoint` imports a recorded
class or function only from trusted modules (rlfleet, gymnasium, the user's own modules already
imported, `trusted_modules`), and checks every name before importing anything.

Each test plants modules whose top-level code writes a marker file beside a checkpoint, makes
that folder the working directory and puts it on `sys.path` (so a plain import would find
them), and edits the manifest to name them.
"""
from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from rlfleet import cli
from rlfleet.algorithms.pg import PGTrainer
from rlfleet.callbacks import DefaultCallbacks
from rlfleet.checkpoint import CheckpointError
from rlfleet.trainer import Trainer
from rlfleet.utils.json_codec import ImportTrust
from tests.helpers import REPO_ROOT

REPO = str(REPO_ROOT)
PLANTED = ("evil_mod", "rlfleet_evil")

_EVIL = '''
import os
with open({marker!r}, "a") as f:
    f.write("{name} ran\\n")

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from rlfleet.callbacks import DefaultCallbacks
from rlfleet.exploration.stochastic_sampling import StochasticSampling


class Callbacks(DefaultCallbacks):
    pass


class EvilEnv(CartPoleEnv):
    def __init__(self, config=None):
        super().__init__()


class Explore(StochasticSampling):
    pass


if "Evil-v0" not in gym.registry:
    gym.register("Evil-v0", entry_point=EvilEnv)
'''


class OwnCallbacks(DefaultCallbacks):
    """Defined in this (already imported) test module: trusted without being named."""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    t = PGTrainer(env="CartPole-v1", logdir=str(root / "run"), config={
        "seed": 3, "num_envs_per_worker": 1, "rollout_fragment_length": 20, "train_batch_size": 40,
        "model": {"fcnet_hiddens": [8]}})
    path = t.save(str(root / "ckpts"))
    t.stop()
    return path


@pytest.fixture
def planted(saved, tmp_path, monkeypatch):
    """A copy of the checkpoint in a folder holding the planted modules; that folder is the
    working directory and on sys.path. Returns (checkpoint path, marker path)."""
    folder = tmp_path / "downloaded"
    folder.mkdir()
    path = str(folder / "checkpoint_0")
    shutil.copytree(saved, path)
    marker = str(tmp_path / "MARKER")
    for name in PLANTED:
        (folder / f"{name}.py").write_text(_EVIL.format(marker=marker, name=name))
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    yield path, marker
    for name in PLANTED:
        sys.modules.pop(name, None)
    import gymnasium as gym

    gym.registry.pop("Evil-v0", None)


def _forge(path, **entries):
    """Rewrites the checkpoint's recorded config (the manifest is what an attacker edits)."""
    manifest_path = os.path.join(path, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    for section in ("config", "user_config"):
        for key, value in entries.items():
            node = manifest[section]
            *parents, last = key.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[last] = value
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)


def _ran(marker):
    return open(marker).read() if os.path.exists(marker) else ""


@pytest.mark.parametrize("key, value, shown", [
    ("callbacks", {"__callable__": "evil_mod:Callbacks"}, "evil_mod:Callbacks"),
    ("env", {"__callable__": "evil_mod:EvilEnv"}, "evil_mod:EvilEnv"),
    ("env", "evil_mod:EvilEnv", "evil_mod:EvilEnv"),  # a class path string
    ("env", "evil_mod.EvilEnv", "evil_mod.EvilEnv"),
    ("env", "evil_mod:Evil-v0", "evil_mod:Evil-v0"),  # Gymnasium's "module:Id" form
    ("exploration_config.type", "evil_mod.Explore", "evil_mod.Explore"),
], ids=["callbacks", "env-class", "env-colon-path", "env-dotted-path", "env-gym-module-id", "exploration-type"])
def test_untrusted_names_are_never_imported(planted, tmp_path, key, value, shown):
    path, marker = planted
    _forge(path, **{key: value})
    with pytest.raises(CheckpointError) as info:
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    message = str(info.value)
    assert f"config key '{key}' records '{shown}', from module 'evil_mod', which is not trusted" in message
    assert "trusted_modules=['evil_mod']" in message and "--trust-module evil_mod" in message
    top = key.split(".")[0]
    assert f"config_overrides={{'{top}': " in message
    assert _ran(marker) == "" and "evil_mod" not in sys.modules

    # Trusted explicitly, it loads (and only now runs).
    b = Trainer.from_checkpoint(path, trusted_modules=["evil_mod"], logdir=str(tmp_path / "c"))
    assert _ran(marker) == "evil_mod ran\n"
    assert b.train()["training_iteration"] == 1
    b.stop()


def test_every_untrusted_name_is_listed_before_any_import(planted, tmp_path):
    path, marker = planted
    _forge(path, callbacks={"__callable__": "tests.checkpoint.test_security:OwnCallbacks"},
           env={"__callable__": "evil_mod:EvilEnv"},
           **{"exploration_config.type": "rlfleet_evil.Explore"})
    with pytest.raises(CheckpointError) as info:
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    message = str(info.value)
    assert "config key 'env' records 'evil_mod:EvilEnv'" in message
    assert "config key 'exploration_config.type': 'rlfleet_evil.Explore'" in message
    assert "trusted_modules=['evil_mod', 'rlfleet_evil']" in message
    assert "config_overrides={'env': ..., 'exploration_config': {'type': ...}}" in message
    assert _ran(marker) == ""


@pytest.mark.parametrize("name, trusted", [
    ("rlfleet_evil:Callbacks", None),        # "rlfleet" is trusted, "rlfleet_evil" is another package
    ("rlfleet_evil:Callbacks", ["rlfleet"]),
    ("evil_mod:Callbacks", ["evil"]),        # trusting "evil" trusts evil.*, not evil_mod
    ("evil_mod:Callbacks", ["evil_mod.sub"]),  # a sub-module does not trust its parent
])
def test_no_trust_by_prefix_confusion(planted, tmp_path, name, trusted):
    path, marker = planted
    _forge(path, callbacks={"__callable__": name})
    with pytest.raises(CheckpointError, match=r"config key 'callbacks' records .*which is not trusted"):
        Trainer.from_checkpoint(path, trusted_modules=trusted, logdir=str(tmp_path / "b"))
    assert _ran(marker) == ""


def test_installed_modules_and_the_stdlib_need_an_explicit_trust(planted, tmp_path):
    """Already imported, but not the user's code: any function of an installed library (or
    the standard library) could be named and later called with the trainer's arguments."""
    path, _ = planted
    for name in ("subprocess:Popen", "torch.nn.modules.linear:Linear", "builtins:eval", "__main__:anything"):
        _forge(path, env={"__callable__": name})
        with pytest.raises(CheckpointError, match=r"config key 'env' records .*which is not trusted"):
            Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))


def test_config_overrides_need_no_import_and_own_modules_are_trusted(planted, tmp_path):
    path, marker = planted
    _forge(path, callbacks={"__callable__": "evil_mod:Callbacks"}, env="evil_mod:Evil-v0")
    b = Trainer.from_checkpoint(path, {"callbacks": OwnCallbacks, "env": "CartPole-v1"},
                                logdir=str(tmp_path / "b"))
    assert isinstance(b.callbacks, OwnCallbacks) and _ran(marker) == ""
    b.stop()
    # A class of the user's own code, already imported, is trusted by name.
    _forge(path, callbacks={"__callable__": "tests.checkpoint.test_security:OwnCallbacks"}, env="CartPole-v1")
    c = Trainer.from_checkpoint(path, logdir=str(tmp_path / "c"))
    assert isinstance(c.callbacks, OwnCallbacks)
    c.stop()


def test_trusted_modules_are_checked():
    assert ImportTrust("mypkg").trusted_modules == ("mypkg",)
    for bad in (["my-pkg"], [""], [3], 5):
        with pytest.raises(ValueError, match="trusted_modules"):
            ImportTrust(bad)


def test_cli_evaluate_refuses_then_trusts(planted, capsys):
    path, marker = planted
    _forge(path, callbacks={"__callable__": "evil_mod:Callbacks"})
    assert cli.main(["evaluate", path, "--episodes", "1"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "config key 'callbacks' records 'evil_mod:Callbacks'" in err and "--trust-module evil_mod" in err
    assert _ran(marker) == ""
    assert cli.main(["evaluate", path, "--episodes", "1", "--trust-module", "evil_mod"]) == 0
    assert _ran(marker) == "evil_mod ran\n"


def test_fresh_process_in_the_checkpoint_folder_runs_nothing(planted):
    """As the issue tried it: a new Python process started in the folder (on sys.path as '')."""
    path, marker = planted
    _forge(path, callbacks={"__callable__": "evil_mod:Callbacks"})
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    code = textwrap.dedent(f"""
        import sys
        assert sys.path[0] == ""
        from rlfleet.trainer import Trainer
        from rlfleet.checkpoint import CheckpointError
        try:
            Trainer.from_checkpoint({path!r})
        except CheckpointError as exc:
            print("refused:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(path), env=env,
                         capture_output=True, text=True, timeout=120)
    assert "refused: " in out.stdout and "config key 'callbacks'" in out.stdout, out.stderr[-2000:]
    assert _ran(marker) == ""


@pytest.mark.parametrize("value", ["evil_mod.Logger", ["JsonLogger", "evil_mod:Logger"]])
def test_logger_class_paths_are_checked_too(planted, tmp_path, value):
    path, marker = planted
    _forge(path, logger_config={"type": value})
    with pytest.raises(CheckpointError, match=r"config key 'logger_config.type(\[1\])?' records 'evil_mod.Logger'"
                                              r"|config key 'logger_config.type\[1\]' records 'evil_mod:Logger'"):
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    assert _ran(marker) == ""


@pytest.mark.parametrize("entries, key, shown", [
    # A trusted class built from a nested dict would resolve the nested string in turn.
    ({"env": {"__callable__": "rlfleet.algorithms.ppo.ppo:PPOTrainer"}, "env_config": {"env": "evil_mod:EvilEnv"}},
     "env_config.env", "evil_mod:EvilEnv"),
    ({"logger_config": {"type": "rlfleet.results.logger.UnifiedLogger", "logger_config": {"type": ["evil_mod.Logger"]}}},
     "logger_config.logger_config.type[0]", "evil_mod.Logger"),
], ids=["trainer-as-env", "nested-logger"])
def test_nested_import_strings_are_checked(planted, tmp_path, entries, key, shown):
    path, marker = planted
    _forge(path, **entries)
    with pytest.raises(CheckpointError, match=rf"config key '{re.escape(key)}' records '{re.escape(shown)}', from "
                                              r"module 'evil_mod', which is not trusted"):
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    assert _ran(marker) == ""


def test_rlfleet_entry_points_are_never_config_values(planted, tmp_path):
    path, marker = planted
    # rlfleet.cli.main would take env_config's keys as its argv.
    _forge(path, env={"__callable__": "rlfleet.cli:main"},
           env_config={"train": 1, "--run": 1, "PG": 1, "--env": 1, "evil_mod:EvilEnv": 1})
    for trusted in (None, ["rlfleet"]):
        with pytest.raises(CheckpointError, match=r"config key 'env' records 'rlfleet.cli:main', an rlfleet entry "
                                                  r"point .*config_overrides=\{'env': \.\.\.\}"):
            Trainer.from_checkpoint(path, trusted_modules=trusted, logdir=str(tmp_path / "b"))
    _forge(path, env={"__callable__": "rlfleet.algorithms.ppo.ppo:PPOTrainer"}, env_config={})
    with pytest.raises(CheckpointError, match=r"config key 'env' records the trainer class .*PPOTrainer'; a trainer "
                                              r"is never a config value"):
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "c"))
    assert _ran(marker) == ""
