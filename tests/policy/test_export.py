"""Export: TorchScript and ONNX models match the torch policy (ONNX through onnxruntime, for a
Discrete and a Box action space), TorchScript loads without rlfleet, exported weights import
back (checked), and the reference's h5 import points to import_model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.checkpoint import CheckpointError
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
ENVS = {
    "CartPole-v1": (4,),
    "Pendulum-v1": (3,),
}


@pytest.fixture(scope="module", params=sorted(ENVS))
def trained(request, tmp_path_factory):
    """A PPO trainer after one small iteration (weights moved off their init)."""
    root = tmp_path_factory.mktemp("export")
    t = PPOTrainer(config={"seed": 3, "num_envs_per_worker": 2, "rollout_fragment_length": 50,
                           "train_batch_size": 100, "sgd_minibatch_size": 50, "num_sgd_iter": 1,
                           "model": {"fcnet_hiddens": [32, 32]}},
                   env=request.param, logdir=str(root / "run"))
    t.train()
    yield request.param, t, root
    t.stop()


def _obs(env_id, n=7):
    return (0.5 * np.random.default_rng(1).normal(size=(n, *ENVS[env_id]))).astype(np.float32)


def _torch_outputs(policy, obs):
    with torch.no_grad():
        out, _ = policy.model({SB.OBS: torch.as_tensor(obs)}, [], None)
        return out.numpy(), policy.model.value_function().numpy()


@pytest.mark.parametrize("opset", [None, 17])
def test_onnx_matches_the_torch_policy(trained, opset, tmp_path, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    env_id, t, _ = trained
    policy = t.get_policy()
    if opset is None:  # export_model's "onnx" format: opset from $ONNX_OPSET, default 11
        monkeypatch.delenv("ONNX_OPSET", raising=False)
        path = t.export_model(["onnx"], str(tmp_path))["onnx"]
        assert path == str(tmp_path / "onnx" / "model.onnx")
    else:
        path = t.export_policy_model(str(tmp_path), onnx=opset)
    meta = json.loads((tmp_path / ("onnx" if opset is None else "") / "model.json").read_text())
    assert meta["kind"] == "onnx" and meta["onnx_opset"] == (opset or 11) and meta["outputs"] == ["actions", "dist_inputs", "value"]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    obs = _obs(env_id)
    env_actions, dist_inputs, values = session.run(None, {"obs": obs})
    want_inputs, want_values = _torch_outputs(policy, obs)
    np.testing.assert_allclose(dist_inputs, want_inputs, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(values, want_values, atol=1e-5, rtol=1e-5)
    # Greedy actions from the ONNX outputs are the policy's greedy actions.
    actions, _, _ = policy.compute_actions(obs, explore=False)
    if env_id == "CartPole-v1":
        np.testing.assert_array_equal(dist_inputs.argmax(axis=1), actions)
        np.testing.assert_array_equal(env_actions, actions)
    else:
        np.testing.assert_allclose(np.split(dist_inputs, 2, axis=1)[0], actions, atol=1e-5)
        # `actions` is unsquashed into Pendulum's [-2, 2], as the env takes it.
        np.testing.assert_allclose(env_actions, 2.0 * np.clip(actions, -1, 1), atol=1e-5)


_TORCHSCRIPT_CHILD = textwrap.dedent("""
    import sys, numpy as np, torch
    model = torch.jit.load(sys.argv[1])
    actions, dist_inputs, values = model(torch.from_numpy(np.load(sys.argv[2])))
    assert "rlfleet" not in sys.modules, "rlfleet was imported"
    np.savez(sys.argv[3], dist_inputs=dist_inputs.detach().numpy(), values=values.detach().numpy())
""")


def test_torchscript_loads_without_rlfleet(trained, tmp_path):
    env_id, t, _ = trained
    path = t.export_policy_model(str(tmp_path / "ts"))
    assert path.endswith("model.pt")
    obs = _obs(env_id, n=5)  # a batch size other than the one traced with
    np.save(tmp_path / "obs.npy", obs)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", _TORCHSCRIPT_CHILD, path, str(tmp_path / "obs.npy"),
                           str(tmp_path / "out.npz")], cwd=str(tmp_path), env=env, capture_output=True, timeout=180)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    out = np.load(tmp_path / "out.npz")
    want_inputs, want_values = _torch_outputs(t.get_policy(), obs)
    np.testing.assert_allclose(out["dist_inputs"], want_inputs, atol=1e-6)
    np.testing.assert_allclose(out["values"], want_values, atol=1e-6)


def test_exported_weights_import_into_another_trainer(trained, tmp_path):
    env_id, t, root = trained
    json_path = t.export_policy_checkpoint(str(tmp_path / "w"), filename_prefix="policy")
    assert sorted(os.listdir(tmp_path / "w")) == ["policy.json", "policy.safetensors"]
    other = PPOTrainer(config={"seed": 11, "num_envs_per_worker": 1, "model": {"fcnet_hiddens": [32, 32]}},
                       env=env_id, logdir=str(tmp_path / "other"))
    obs = _obs(env_id)
    assert not np.allclose(_torch_outputs(other.get_policy(), obs)[0], _torch_outputs(t.get_policy(), obs)[0])
    for source in (json_path, str(tmp_path / "w" / "policy.safetensors")):
        other.import_model(source)
        for key, value in t.get_weights()["default_policy"].items():
            np.testing.assert_array_equal(value, other.get_weights()["default_policy"][key])
    # A damaged file, and weights of another shape, are refused with the reason.
    data = bytearray((tmp_path / "w" / "policy.safetensors").read_bytes())
    data[-3] ^= 1
    (tmp_path / "w" / "policy.safetensors").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted: its SHA-256"):
        other.import_model(json_path)
    small = PPOTrainer(config={"num_envs_per_worker": 1, "model": {"fcnet_hiddens": [8]}}, env=env_id,
                       logdir=str(tmp_path / "small"))
    small.export_policy_checkpoint(str(tmp_path / "small_w"))
    with pytest.raises(CheckpointError, match=r"tensors missing from the file|tensor 'trunk.0.weight' has shape"):
        other.import_model(str(tmp_path / "small_w"))
    other.stop()
    small.stop()


def test_export_model_writes_every_format(trained, tmp_path):
    _, t, _ = trained
    paths = t.export_model(["model", "onnx", "checkpoint"], str(tmp_path))
    assert paths == {"model": str(tmp_path / "model" / "model.pt"), "onnx": str(tmp_path / "onnx" / "model.onnx"),
                     "checkpoint": str(tmp_path / "checkpoint" / "model.json")}
    assert all(os.path.isfile(p) for p in paths.values())
    with pytest.raises(ValueError, match=r"unknown export format\(s\) \['h5'\].*import_model"):
        t.export_model(["h5"], str(tmp_path))


def test_export_metadata_records_the_versions_a_checkpoint_manifest_does(trained, tmp_path):
    # One writer of "what wrote this" (utils/versions.py) for checkpoints and exports alike.
    from rlfleet.utils.versions import software_versions

    _, t, _ = trained
    paths = t.export_model(["model", "checkpoint"], str(tmp_path))
    manifest = json.loads(open(os.path.join(t.save(str(tmp_path / "ck")), "manifest.json")).read())
    for meta_path in (str(tmp_path / "model" / "model.json"), paths["checkpoint"]):
        meta = json.loads(open(meta_path).read())
        assert meta["versions"] == manifest["versions"] == software_versions()
        assert meta["rlfleet_version"] == manifest["rlfleet_version"]


def test_h5_import_points_to_import_model(trained):
    _, t, _ = trained
    with pytest.raises(ValueError, match=r"no Keras.*import_model"):
        t.import_policy_model_from_h5("model.h5")


def test_exported_value_only_for_models_with_a_value_head():
    from rlfleet.algorithms.dqn import DQNTrainer
    from rlfleet.algorithms.ppo import PPOTrainer

    assert PPOTrainer(env="CartPole-v1", config={"seed": 0}).get_policy().model.has_value_function
    assert not DQNTrainer(env="CartPole-v1", config={"seed": 0}).get_policy().model.has_value_function


def test_import_model_never_imports_names_in_the_metadata(trained, tmp_path, monkeypatch):
    """The class and model config an export records are information only: import_model reads
    the weights (checked) and imports nothing the metadata names."""
    env_id, t, root = trained
    folder = tmp_path / "w"
    json_path = t.export_policy_checkpoint(str(folder))
    t.export_policy_model(str(folder / "ts"))
    marker = tmp_path / "MARKER"
    (folder / "export_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass P: pass\n")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    for meta_path in (json_path, str(folder / "ts" / "model.json")):
        with open(meta_path) as f:
            meta = json.load(f)
        meta.update(policy_class="export_evil:P", action_dist="export_evil:P",
                    model_config={"custom_model": {"__callable__": "export_evil:P"}})
        with open(meta_path, "w") as f:
            json.dump(meta, f)
    t.import_model(str(folder))
    t.import_model(json_path)
    assert not marker.exists() and "export_evil" not in sys.modules
