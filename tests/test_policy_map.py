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
