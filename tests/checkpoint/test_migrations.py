"""Checkpoint format migrations (rlfleet.checkpoint.migrations) and upgrades
(rlfleet.checkpoint.upgrade), on a real checkpoint on disk: PPO's golden checkpoint (with an
observation filter) rewritten in a synthetic format 0, and the migration 0 -> 1 registered."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rlfleet.checkpoint import CheckpointError, read_checkpoint, read_manifest
from rlfleet.checkpoint.migrations import MIGRATIONS, Migration, migrate, register_migration
from rlfleet.checkpoint.upgrade import upgrade_checkpoint
from rlfleet.trainer import Trainer
from tests.golden_cases import (
    DIST_INPUTS, GOLDEN_ROOT, VERSION_0_CHANGE, act, checkpoint_of, from_json, leaves, migrate_version_0, read_golden,
    write_version_0,
)

CASE = GOLDEN_ROOT / "format_1" / "PPO"


@pytest.fixture
def version_0(tmp_path):
    """PPO's golden checkpoint in the synthetic format 0."""
    path = tmp_path / "v0" / "checkpoint_2"
    write_version_0(checkpoint_of(CASE), path)
    return path


@pytest.fixture
def migration_0(monkeypatch):
    monkeypatch.setitem(MIGRATIONS, 0, Migration(0, VERSION_0_CHANGE, migrate_version_0))


def _assert_tree_equal(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _assert_tree_equal(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_tree_equal(x, y, f"{path}/{i}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), path
    else:
        assert a == b, path


def test_a_version_0_checkpoint_loads_through_its_migration_and_acts_as_recorded(version_0, migration_0, tmp_path):
    on_disk = read_manifest(str(version_0))
    assert on_disk["format_version"] == 0 and "timesteps" in on_disk and "counters" not in on_disk
    assert "policies/default_policy/weights.safetensors" not in on_disk["files"]  # the weights sit elsewhere
    golden = read_golden(CASE)
    trainer = Trainer.from_checkpoint(str(version_0), logdir=str(tmp_path / "run"))
    try:
        assert trainer.iteration == golden["iteration"]
        rec = golden["policies"]["default_policy"]
        actions, outputs = act(trainer, "default_policy", [from_json(o) for o in rec["observations"]])
        for want, got in zip(rec["actions"] + rec[DIST_INPUTS], actions + outputs):
            for w, g in zip(leaves(from_json(want)), leaves(got)):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert trainer.train()["training_iteration"] == golden["iteration"] + 1
    finally:
        trainer.stop()


def test_without_its_migration_an_older_format_is_refused_naming_the_versions(version_0):
    with pytest.raises(CheckpointError, match=r"knows no migration from format 0 to 1 \(it reads format versions 1 "
                                              r"to 1\)\. Load it with the rlfleet version that wrote it"):
        Trainer.from_checkpoint(str(version_0))
    with pytest.raises(CheckpointError, match="knows no migration from format 0 to 1"):
        upgrade_checkpoint(str(version_0))


def test_upgrade_writes_the_current_format_with_the_same_content(version_0, migration_0, tmp_path, monkeypatch):
    original = read_checkpoint(str(checkpoint_of(CASE)))
    out = tmp_path / "upgraded" / "checkpoint_2"
    report = upgrade_checkpoint(str(version_0), out=str(out))
    assert (report.from_version, report.to_version, report.migrations) == (0, 1, [VERSION_0_CHANGE])
    assert read_manifest(str(version_0))["format_version"] == 0  # --out leaves the original alone
    with pytest.raises(CheckpointError, match="exists already"):
        upgrade_checkpoint(str(version_0), out=str(out))

    monkeypatch.delitem(MIGRATIONS, 0)  # the upgraded checkpoint needs no migration any more
    upgraded = read_checkpoint(str(out))
    assert upgraded.manifest["format_version"] == 1 and "migrated_from" not in upgraded.manifest
    assert upgraded.manifest["upgraded_from"]["format_version"] == 0
    assert upgraded.manifest["upgraded_from"]["migrations"] == [VERSION_0_CHANGE]
    assert sorted(upgraded.manifest["files"]) == sorted(original.manifest["files"])  # weights back in their file
    _assert_tree_equal(upgraded.state, original.state)
    for key in ("algorithm", "iteration", "counters", "config", "user_config", "policies", "resume_seed"):
        assert upgraded.manifest[key] == original.manifest[key], key
    assert upgrade_checkpoint(str(out)).written is None  # current already: nothing written


def test_upgrade_in_place_replaces_the_folder(version_0, migration_0):
    report = upgrade_checkpoint(str(version_0 / "manifest.json"))
    assert report.written == str(version_0)
    assert read_manifest(str(version_0))["format_version"] == 1
    assert sorted(p.name for p in version_0.parent.iterdir()) == ["checkpoint_2"]  # no temp folder left


def test_migrations_apply_in_order_and_a_failing_one_names_its_step(monkeypatch):
    calls = []

    def step(version):
        def apply(manifest, state):
            calls.append(version)
            return dict(manifest, seen=manifest.get("seen", []) + [version]), state
        return apply

    for version in (3, 4):
        monkeypatch.setitem(MIGRATIONS, version, Migration(version, f"step {version}", step(version)))
    manifest, state = migrate({"format_version": 3}, {"x": 1}, 5, "ck")
    assert calls == [3, 4] and manifest == {"format_version": 5, "seen": [3, 4], "migrated_from": 3}
    same = {"format_version": 5}
    assert migrate(same, {}, 5, "ck")[0] is same  # current: untouched, not copied

    monkeypatch.setitem(MIGRATIONS, 4, Migration(4, "step 4", lambda m, s: (m, s["missing"])))
    with pytest.raises(CheckpointError, match=r"could not be migrated from format 4 to 5 \(step 4\): KeyError"):
        migrate({"format_version": 3}, {}, 5, "ck")
    with pytest.raises(CheckpointError, match=r"no migration from format 2 to 3 \(it reads format versions 3 to 5\)"):
        migrate({"format_version": 2}, {}, 5, "ck")


def test_register_migration_refuses_a_second_one_and_bad_versions(monkeypatch):
    monkeypatch.setattr("rlfleet.checkpoint.migrations.MIGRATIONS", {})
    from rlfleet.checkpoint import migrations

    register_migration(7, "first")(migrate_version_0)
    assert migrations.MIGRATIONS[7].apply is migrate_version_0
    with pytest.raises(ValueError, match="a migration from format version 7 is already registered: 'first'"):
        register_migration(7, "second")
    for bad in (-1, "1", True):
        with pytest.raises(ValueError, match="from_version must be an int >= 0"):
            register_migration(bad, "bad")


def test_a_newer_format_is_refused_with_the_advice_to_upgrade_rlfleet(tmp_path):
    path = tmp_path / "checkpoint_2"
    shutil.copytree(checkpoint_of(CASE), path)
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    (path / "manifest.json").write_text(json.dumps(dict(manifest, format_version=2)), encoding="utf-8")
    for load in (read_checkpoint, upgrade_checkpoint):
        with pytest.raises(CheckpointError, match="has format version 2 .* reads format versions up to 1: upgrade "
                                                  "rlfleet to load it"):
            load(str(path))
