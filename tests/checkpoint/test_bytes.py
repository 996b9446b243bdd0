"""The reference's `Trainer.get_config()`, `save_to_object()` / `restore_from_object()`: a checkpoint
as bytes in the safe format (a ZIP of JSON + safetensors; issue 26)."""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.utils.safe_files import CheckpointError

SMALL = {"seed": 1, "train_batch_size": 64, "rollout_fragment_length": 32, "sgd_minibatch_size": 32,
         "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "observation_filter": "MeanStdFilter"}
OBS = np.array([0.01, -0.02, 0.03, 0.04], np.float32)


@pytest.fixture
def trained(tmp_path):
    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path / "a"), config=SMALL)
    trainer.train()
    yield trainer
    trainer.stop()


def test_get_config_is_a_copy_of_the_full_config(trained):
    config = trained.get_config()
    assert config["train_batch_size"] == 64 and config["gamma"] == trained.config["gamma"]  # defaults merged
    config["model"]["fcnet_hiddens"].append(99)
    assert trained.config["model"]["fcnet_hiddens"] == [8]


def test_round_trip_gives_the_same_weights_actions_and_counters(trained, tmp_path):
    data = trained.save_to_object()
    assert isinstance(data, bytes)
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "manifest.json" in names and not any(n.endswith((".pkl", ".pickle")) for n in names)

    fresh = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path / "b"), config=dict(SMALL, seed=2))
    try:
        before = fresh.get_policy().get_weights()
        fresh.restore_from_object(data)
        after, expected = fresh.get_policy().get_weights(), trained.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in after)
        for k in expected:
            np.testing.assert_array_equal(after[k], expected[k])
        assert fresh.iteration == trained.iteration == 1
        assert fresh.compute_single_action(OBS, explore=False) == trained.compute_single_action(OBS, explore=False)
        # And the restored trainer trains on from there.
        assert fresh.train()["training_iteration"] == 2
    finally:
        fresh.stop()


@pytest.mark.parametrize("garbage", [b"", b"not a checkpoint at all", b"PK\x03\x04" + b"\x00" * 40])
def test_garbage_bytes_raise_a_clear_error(trained, garbage):
    weights = trained.get_policy().get_weights()
    with pytest.raises(CheckpointError, match="not a checkpoint written by Trainer.save_to_object"):
        trained.restore_from_object(garbage)
    for k, v in trained.get_policy().get_weights().items():
        np.testing.assert_array_equal(v, weights[k])  # unchanged


def _rezip(data: bytes, edit) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            edit(dst, name, src.read(name))
    return out.getvalue()


def test_damaged_or_hostile_archives_are_refused(trained):
    data = trained.save_to_object()
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        trained.restore_from_object(data[: len(data) // 2])  # truncated
    with pytest.raises(CheckpointError, match="not a plain relative file path"):
        trained.restore_from_object(_rezip(data, lambda z, n, b: z.writestr("../" + n if n == "state.json" else n, b)))
    with pytest.raises(CheckpointError, match="no manifest.json"):
        trained.restore_from_object(_rezip(data, lambda z, n, b: n != "manifest.json" and z.writestr(n, b)))
    # A flipped byte in a weights file: the checksum in the manifest catches it.
    def flip(z, n, b):
        z.writestr(n, b[:-1] + bytes([b[-1] ^ 1]) if n.endswith("weights.safetensors") else b)
    with pytest.raises(CheckpointError):
        trained.restore_from_object(_rezip(data, flip))
    with pytest.raises(CheckpointError, match="expects the bytes"):
        trained.restore_from_object("a path")
