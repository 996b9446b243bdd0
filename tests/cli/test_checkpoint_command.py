"""`rlfleet checkpoint inspect` and `rlfleet checkpoint upgrade` on real checkpoints (the golden
ones, copies of them damaged or rewritten in a synthetic older format), and their errors."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from rlfleet import cli
from rlfleet.checkpoint import read_manifest
from rlfleet.checkpoint.migrations import MIGRATIONS, Migration
from tests.golden_cases import GOLDEN_ROOT, VERSION_0_CHANGE, checkpoint_of, migrate_version_0, write_version_0
from tests.helpers import REPO_ROOT

DQN = checkpoint_of(GOLDEN_ROOT / "format_1" / "DQN")
MADDPG = checkpoint_of(GOLDEN_ROOT / "format_1" / "MADDPG")


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _copy(src, tmp_path, name="checkpoint_2"):
    path = tmp_path / name
    shutil.copytree(src, path)
    return path


def test_inspect_shows_algorithm_policies_spaces_buffers_sizes_and_version(capsys):
    code, out, err = _run(capsys, "checkpoint", "inspect", str(DQN))
    assert code == 0, err
    manifest = read_manifest(str(DQN))
    weights = manifest["policies"]["default_policy"]["weights"]
    params = sum(math.prod(s) for s in weights.values())
    for text in ("format       version 1 (current)", "algorithm    DQN (rlfleet.algorithms.dqn.dqn:DQNTrainer)",
                 "env          CartPole-v1", "iteration 2", "default_policy: rlfleet.algorithms.dqn.dqn_policy:",
                 "action space       Discrete(2)", "observation space  Box(", f"{params:,} parameters in {len(weights)}",
                 "replay_buffers/default_policy: 64 of 50,000 rows (PrioritizedReplayBuffer)",
                 "replay_buffers/default_policy.safetensors", "sizes checked; --verify checks SHA-256 too"):
        assert text in out, text

    code, out, _ = _run(capsys, "checkpoint", "inspect", str(MADDPG), "--json", "--verify")
    summary = json.loads(out)
    assert code == 0 and summary["verified"] and summary["algorithm"] == "MADDPG"
    assert sorted(summary["policies"]) == ["a", "b"]
    assert summary["policies"]["a"]["action_space"] == "Discrete(3)"
    assert summary["replay_buffers"]["joint_replay_buffer"]["size"] == 64
    sizes = {rel: f["size"] for rel, f in summary["files"].items()}
    assert sizes == {rel: os.path.getsize(MADDPG / rel) for rel in sizes}
    assert summary["total_bytes"] == sum(sizes.values())
    assert all(f["status"] == "ok" for f in summary["files"].values())


def test_inspect_imports_nothing_the_checkpoint_names(tmp_path):
    """A checkpoint naming a module that announces its import (and exists on the path): inspect
    shows the name and never imports it, nor any algorithm, nor torch or Gymnasium."""
    (tmp_path / "planted_callbacks.py").write_text(textwrap.dedent(f"""
        open({str(tmp_path / 'IMPORTED')!r}, "w").close()
        from rlfleet.callbacks import DefaultCallbacks
        class Callbacks(DefaultCallbacks):
            pass
        """), encoding="utf-8")
    path = _copy(DQN, tmp_path)
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    manifest["user_config"]["callbacks"] = {"__callable__": "planted_callbacks:Callbacks"}
    manifest["user_config"]["env"] = {"__callable__": "planted_callbacks:Callbacks"}
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    script = ("import sys; from rlfleet.cli import main; code = main(['checkpoint', 'inspect', sys.argv[1]]); "
              "print('IMPORTED:', sorted(m for m in sys.modules "
              "if m.startswith(('rlfleet.algorithms', 'planted')) or m in ('torch', 'gymnasium')))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "src"), str(tmp_path)]))
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "env          planted_callbacks:Callbacks" in proc.stdout
    assert "IMPORTED: []" in proc.stdout
    assert not (tmp_path / "IMPORTED").exists()


def test_not_a_checkpoint_and_a_newer_format_are_errors_naming_the_problem(tmp_path, capsys):
    for action in ("inspect", "upgrade"):
        code, _, err = _run(capsys, "checkpoint", action, str(tmp_path))
        assert code == cli.EXIT_USAGE and "is not an rlfleet checkpoint: it has no manifest.json" in err
    code, _, err = _run(capsys, "checkpoint", "inspect", str(DQN.parent))  # a folder of checkpoints
    assert code == cli.EXIT_USAGE and "it holds the checkpoints ['checkpoint_2']: inspect one of them" in err

    newer = _copy(DQN, tmp_path)
    manifest = json.loads((newer / "manifest.json").read_text(encoding="utf-8"))
    (newer / "manifest.json").write_text(json.dumps(dict(manifest, format_version=9)), encoding="utf-8")
    for action in ("inspect", "upgrade"):
        code, _, err = _run(capsys, "checkpoint", action, str(newer))
        assert code == cli.EXIT_USAGE
        assert "has format version 9" in err and "reads format versions up to 1: upgrade rlfleet to load it" in err
    code, _, err = _run(capsys, "checkpoint")
    assert code == cli.EXIT_USAGE and "name an action: inspect or upgrade" in err


def test_inspect_names_damaged_files(tmp_path, capsys):
    path = _copy(DQN, tmp_path)
    weights = path / "policies" / "default_policy" / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    os.remove(path / "replay_buffers" / "default_policy.safetensors")
    code, out, err = _run(capsys, "checkpoint", "inspect", str(path))
    assert code == cli.EXIT_USAGE
    assert "<- MISSING" in out and "<- DAMAGED:" in out
    assert "is damaged: policies/default_policy/weights.safetensors (damaged:" in err
    assert "replay_buffers/default_policy.safetensors (missing)" in err

    flipped = _copy(DQN, tmp_path, "checkpoint_3")  # same size, other bytes: only --verify reads them
    weights = flipped / "policies" / "default_policy" / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert _run(capsys, "checkpoint", "inspect", str(flipped))[0] == 0
    code, out, err = _run(capsys, "checkpoint", "inspect", str(flipped), "--verify")
    assert code == cli.EXIT_USAGE and "<- DAMAGED: ITS SHA-256 DIFFERS FROM THE MANIFEST'S" in out
    assert "is damaged: policies/default_policy/weights.safetensors (damaged: its SHA-256 differs" in err


def test_upgrade_rewrites_an_older_format_and_inspect_tells_it(tmp_path, capsys, monkeypatch):
    old = tmp_path / "run" / "checkpoint_2"
    write_version_0(DQN, old)
    code, out, _ = _run(capsys, "checkpoint", "inspect", str(old))
    assert code == 0 and "version 0: this rlfleet cannot read it (it reads versions 1 to 1)" in out

    monkeypatch.setitem(MIGRATIONS, 0, Migration(0, VERSION_0_CHANGE, migrate_version_0))
    code, out, _ = _run(capsys, "checkpoint", "inspect", str(old))
    assert code == 0 and "version 0, older than this rlfleet's 1: it loads through 1 migration" in out
    code, out, err = _run(capsys, "checkpoint", "upgrade", str(old))
    assert code == 0, err
    assert f"Upgraded {old} from format version 0 to 1; wrote {old}\n  0 -> 1: {VERSION_0_CHANGE}" in out
    code, out, _ = _run(capsys, "checkpoint", "inspect", str(old), "--verify")
    assert code == 0 and "version 1 (current); upgraded from version 0" in out
    code, out, _ = _run(capsys, "checkpoint", "upgrade", str(old))
    assert code == 0 and "already format version 1 (current); nothing to do" in out
    code, _, err = _run(capsys, "checkpoint", "upgrade", str(old), "--out", str(DQN))
    assert code == cli.EXIT_USAGE and "exists already" in err
