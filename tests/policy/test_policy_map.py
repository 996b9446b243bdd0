"""PolicyMap: LRU with spill to safetensors + JSON, transparent restore."""
from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.pg.pg import PGTrainer
from rlfleet.algorithms.ppo.ppo import DEFAULT_CONFIG
from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy
from rlfleet.config import ALLOW_UNKNOWN_SUBKEYS, OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES, merge_configs
from rlfleet.env.multi_agent_env import make_multi_agent
from rlfleet.policy.policy_map import PolicyMap
from rlfleet.policy.sample_batch import SampleBatch

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)


def ppo_config():
    return merge_configs(DEFAULT_CONFIG, {"seed": 7, "model": {"fcnet_hiddens": [8]}}, False,
                         ALLOW_UNKNOWN_SUBKEYS, OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES)


def learn_once(policy):
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    actions, _, extra = policy.compute_actions(obs)
    batch = SampleBatch({SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions, **extra,
                         SampleBatch.ADVANTAGES: rng.normal(size=16).astype(np.float32),
                         SampleBatch.VALUE_TARGETS: rng.normal(size=16).astype(np.float32)})
    policy.learn_on_batch(batch)


def test_capacity_two_with_five_policies_spills_and_restores_identical_state(tmp_path):
    pm = PolicyMap(capacity=2, cache_dir=str(tmp_path))
    weights, opt_states, rng_states = {}, {}, {}
    for i in range(5):
        policy = pm.create_policy(f"p{i}", PPOTorchPolicy, OBS, ACT, ppo_config())
        learn_once(policy)  # optimizer moments and RNG draws that must survive too
        policy.kl_coeff = 0.1 * (i + 1)
        weights[f"p{i}"] = policy.get_weights()
        opt_states[f"p{i}"] = policy.optimizer.state_dict()
        rng_states[f"p{i}"] = (policy.generator.get_state().clone(), policy.np_random.bit_generator.state)
    assert pm.in_memory() == ["p3", "p4"] and pm.spilled() == ["p0", "p1", "p2"]
    assert len(pm) == 5 and list(pm) == [f"p{i}" for i in range(5)] and "p0" in pm

    files = sorted(os.listdir(pm.cache_dir))
    assert len(files) == 6 and {os.path.splitext(f)[1] for f in files} == {".json", ".safetensors"}
    for name in files:
        path = os.path.join(pm.cache_dir, name)
        with open(path, "rb") as f:
            assert not f.read(2).startswith(b"\x80")  # no pickle protocol header anywhere
        if name.endswith(".json"):
            with open(path) as f:
                json.load(f)

    for i in range(5):
        pid = f"p{i}"
        policy = pm[pid]
        for k, v in weights[pid].items():
            assert np.array_equal(policy.get_weights()[k], v), (pid, k)
        assert policy.kl_coeff == pytest.approx(0.1 * (i + 1))
        restored = policy.optimizer.state_dict()
        for idx, st in opt_states[pid]["state"].items():
            for key, value in st.items():
                assert torch.equal(restored["state"][idx][key], value), (pid, key)
        assert torch.equal(policy.generator.get_state(), rng_states[pid][0])
        assert policy.np_random.bit_generator.state == rng_states[pid][1]
        assert policy.policy_id == pid
        assert len(pm.in_memory()) <= 2
    # Restored policies keep learning.
    learn_once(pm["p0"])

    del pm["p1"]
    assert "p1" not in pm and len(pm) == 4
    assert not any(f.startswith("p1-") for f in os.listdir(pm.cache_dir))
    pm.close()
    assert not os.path.exists(str(tmp_path / os.path.basename(pm.cache_dir or "gone")))


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="'multiagent.policy_map_capacity': 0 must be an int >= 1"):
        PolicyMap(capacity=0)


def test_trainer_with_more_policies_than_capacity(tmp_path):
    three = make_multi_agent("CartPole-v1")
    trainer = PGTrainer(env=three, logdir=str(tmp_path), config={
        "seed": 0, "rollout_fragment_length": 20, "train_batch_size": 40, "model": {"fcnet_hiddens": [8]},
        "env_config": {"num_agents": 3},
        "multiagent": {"policies": {"p0", "p1", "p2"}, "policy_map_capacity": 2,
                       "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}})
    result = trainer.train()
    assert set(result["info"]["learner"]) == {"p0", "p1", "p2"}
    local = trainer.workers.local_worker()
    assert len(local.policy_map.in_memory()) == 2
    # Default cache folder: under the run's results folder.
    assert local.policy_map.cache_dir.startswith(os.path.join(str(tmp_path), "policy_map_cache"))
    weights = trainer.get_weights()
    assert set(weights) == {"p0", "p1", "p2"}
    trainer.stop()
    assert local.policy_map.cache_dir is None  # stop() removed the spill folder


def test_spill_files_are_data_only_and_checked(tmp_path, monkeypatch):
    """A spill file edited on disk (another user of a shared cache folder) is refused; it
    names no class or function, and an entry naming one is never imported."""
    import sys

    from rlfleet.checkpoint import CheckpointError

    pm = PolicyMap(capacity=1, cache_dir=str(tmp_path / "cache"))
    for i in range(3):
        pm.create_policy(f"p{i}", PPOTorchPolicy, OBS, ACT, ppo_config())
    assert pm.spilled() == ["p0", "p1"]
    texts = [open(os.path.join(pm.cache_dir, f)).read() for f in os.listdir(pm.cache_dir) if f.endswith(".json")]
    assert texts and not any("__callable__" in t or "PPOTorchPolicy" in t for t in texts)

    marker = tmp_path / "MARKER"
    (tmp_path / "spill_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass X: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    json_path = next(os.path.join(pm.cache_dir, f) for f in os.listdir(pm.cache_dir)
                     if f.startswith("p0-") and f.endswith(".json"))
    with open(json_path) as f:
        doc = json.load(f)
    doc["state"] = {"__callable__": "spill_evil:X"}
    with open(json_path, "w") as f:
        json.dump(doc, f)
    with pytest.raises(CheckpointError, match=r"policy map cache file .*p0-.*changed on disk"):
        pm["p0"]
    assert "p0" in pm.spilled() and not marker.exists() and "spill_evil" not in sys.modules
    learn_once(pm["p1"])  # the others still load
    pm.close()


def test_a_failing_spill_keeps_the_policy_in_memory(tmp_path, monkeypatch):
    import builtins
    import errno

    pm = PolicyMap(capacity=1, cache_dir=str(tmp_path / "cache"))
    p0 = pm.create_policy("p0", PPOTorchPolicy, OBS, ACT, ppo_config())
    real_open = builtins.open

    def full_disk(path, mode="r", *args, **kwargs):
        if "w" in mode and str(path).endswith(".json"):  # the second of the two files
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full_disk)
    with pytest.raises(OSError, match=r"spilling policy 'p0' to .* failed \(\[Errno 28\] No space left on device\); "
                                      r"it stays in memory"):
        pm.create_policy("p1", PPOTorchPolicy, OBS, ACT, ppo_config())
    monkeypatch.undo()
    assert pm["p0"] is p0 and os.listdir(pm.cache_dir) == []  # no partial files
    assert sorted(pm.in_memory()) == ["p0", "p1"] and pm.spilled() == []
    pm.create_policy("p2", PPOTorchPolicy, OBS, ACT, ppo_config())  # space again: spills as usual
    assert len(pm.in_memory()) == 1 and len(pm.spilled()) == 2
    pm.close()
