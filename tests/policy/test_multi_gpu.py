"""Devices and multi-tower SGD (`num_gpus`, `_fake_gpus`, `num_gpus_per_worker`; policy/towers.py).

With `_fake_gpus: True` the towers are CPU copies of the model, so the whole multi-tower
path (load once, split each minibatch, weighted gradient sum, one step, re-sync) runs here:
its update must equal the one-tower update on the same batch.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.a2c import A2CTrainer
from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.towers import Towers, learner_devices
from rlfleet.rollout.postprocessing import standardized

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")


def _trainers(cls, env, config, gpus, tmp_path):
    """A one-tower trainer and a fake-tower one (`gpus` towers), built alike (same seed)."""
    base = dict(config, seed=7, log_sys_usage=False, num_workers=0)
    one = cls(env=env, config=dict(base, num_gpus=0), logdir=str(tmp_path / "one"))
    many = cls(env=env, config=dict(base, num_gpus=gpus, _fake_gpus=True), logdir=str(tmp_path / "many"))
    return one, many


def _assert_same_weights(a, b, atol=1e-6):
    wa, wb = a.get_policy().get_weights(), b.get_policy().get_weights()
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_allclose(wa[k], wb[k], rtol=0, atol=atol, err_msg=k)


def _changed(before, policy) -> bool:
    after = policy.get_weights()
    return any(not np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("gpus,sgd_iter,minibatch", [(2, 1, None), (3, 2, 100), (1.5, 1, None)])
def test_ppo_fake_towers_step_equals_one_tower(tmp_path, gpus, sgd_iter, minibatch):
    one, many = _trainers(PPOTrainer, "CartPole-v1", {"train_batch_size": 256, "rollout_fragment_length": 256,
                                                      "model": {"fcnet_hiddens": [32, 32]}}, gpus, tmp_path)
    try:
        assert len(many.get_policy().towers) == int(np.ceil(gpus)) and one.get_policy().towers is None
        _assert_same_weights(one, many, atol=0)
        batch = one.workers.local_worker().sample()
        batch[SampleBatch.ADVANTAGES] = standardized(batch[SampleBatch.ADVANTAGES])
        before = one.get_policy().get_weights()
        # Sampling drew from `one`'s generator: give `many` the same minibatch order.
        many.get_policy().np_random.bit_generator.state = one.get_policy().np_random.bit_generator.state
        infos = [t.get_policy().multi_epoch_sgd(batch.copy(), sgd_iter, minibatch or batch.count)
                 for t in (one, many)]
        assert _changed(before, one.get_policy())
        _assert_same_weights(one, many)
        for k, v in infos[0]["learner_stats"].items():
            assert infos[1]["learner_stats"][k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
    finally:
        one.stop(), many.stop()


def test_dqn_fake_towers_step_equals_one_tower(tmp_path):
    # Prioritized replay: the loss is importance-weighted and reports per-sample TD errors,
    # which must come back whole and in row order from the towers.
    config = {"hiddens": [32], "model": {"fcnet_hiddens": [32]}, "n_step": 3, "learning_starts": 0,
              "rollout_fragment_length": 200, "train_batch_size": 64}
    one, many = _trainers(DQNTrainer, "CartPole-v1", config, 2, tmp_path)
    try:
        one.train()  # fills the replay buffer
        batch = one.local_replay_buffer.sample(64, beta=0.4)
        # The same starting point: weights, target net and (untouched) Adam state.
        one.get_policy().set_state(many.get_policy().get_state())
        before = one.get_policy().get_weights()
        out = [t.get_policy().learn_on_batch(batch.copy()) for t in (one, many)]
        assert _changed(before, one.get_policy())
        _assert_same_weights(one, many)
        np.testing.assert_allclose(out[0]["td_error"], out[1]["td_error"], rtol=1e-5, atol=1e-6)
        assert out[1]["td_error"].shape == (64,)
        # The tower copies follow the first tower (and its target net) from step to step.
        many.get_policy().update_target()
        many.get_policy().learn_on_batch(batch.copy())
        main, copy = many.get_policy().towers.models
        # The step moved the first tower's weights after the copies were synced for it...
        assert any(not torch.equal(a, b) for a, b in zip(main.state_dict().values(), copy.state_dict().values()))
        many.get_policy().towers.sync()  # ...which the next step's sync (done here by hand) carries over
        for a, b in zip(main.state_dict().values(), copy.state_dict().values()):
            assert torch.equal(a, b)
    finally:
        one.stop(), many.stop()


def test_pg_and_summed_a2c_loss_fake_towers_equal_one_tower(tmp_path, monkeypatch):
    # PG's loss is a mean over rows; A2C's a sum (its policy must say loss_reduction="sum").
    from rlfleet.algorithms.a2c.a2c_policy import A2CTorchPolicy

    monkeypatch.setattr(A2CTorchPolicy, "loss_reduction", "sum")
    for cls in (PGTrainer, A2CTrainer):
        one, many = _trainers(cls, "CartPole-v1", {"train_batch_size": 200, "rollout_fragment_length": 200,
                                                   "model": {"fcnet_hiddens": [16]}}, 2, tmp_path / cls.__name__)
        try:
            batch = one.workers.local_worker().sample()
            for t in (one, many):
                t.get_policy().learn_on_batch(batch.copy())
            _assert_same_weights(one, many)
        finally:
            one.stop(), many.stop()


def test_ppo_fake_towers_near_defaults_other_env_and_lstm(tmp_path):
    # Near-default PPO on a continuous env with 2 fake towers trains; so does an LSTM (shards of
    # whole sequences, weighted by their real, unpadded rows).
    for env, model in (("Pendulum-v1", {}), ("CartPole-v1", {"use_lstm": True, "lstm_cell_size": 16,
                                                             "max_seq_len": 10, "fcnet_hiddens": [16]})):
        config = {"num_gpus": 2, "_fake_gpus": True, "train_batch_size": 400, "sgd_minibatch_size": 100,
                  "num_sgd_iter": 2, "seed": 3, "log_sys_usage": False, "model": model}
        trainer = PPOTrainer(env=env, config=config, logdir=str(tmp_path / env))
        try:
            before = trainer.get_policy().get_weights()
            result = trainer.train()
            stats = result["info"]["learner"]["default_policy"]["learner_stats"]
            assert np.isfinite(stats["total_loss"]) and _changed(before, trainer.get_policy())
        finally:
            trainer.stop()
    # LSTM towers give the one-tower update too.
    cfg = {"train_batch_size": 200, "rollout_fragment_length": 200,
           "model": {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 7, "fcnet_hiddens": [8]}}
    one, many = _trainers(PPOTrainer, "CartPole-v1", cfg, 2, tmp_path / "lstm")
    try:
        batch = one.workers.local_worker().sample()
        batch[SampleBatch.ADVANTAGES] = standardized(batch[SampleBatch.ADVANTAGES])
        for t in (one, many):
            t.get_policy().multi_epoch_sgd(batch.copy(), 1, batch.count)
        _assert_same_weights(one, many)
    finally:
        one.stop(), many.stop()


@no_cuda
def test_num_gpus_without_cuda_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError) as info:
        PPOTrainer(env="CartPole-v1", config={"num_gpus": 1}, logdir=str(tmp_path))
    msg = str(info.value)
    assert "'num_gpus': 1" in msg and "'_fake_gpus': True" in msg and "'num_gpus': 0" in msg
    with pytest.raises(ValueError, match="'num_gpus': 0.5"):
        DQNTrainer(env="CartPole-v1", config={"num_gpus": 0.5}, logdir=str(tmp_path))
    # A remote worker's policy asks for num_gpus_per_worker (checked where it runs).
    with pytest.raises(ValueError) as info:
        learner_devices({"worker_index": 2, "num_gpus_per_worker": 1})
    assert "'num_gpus_per_worker': 1" in str(info.value) and "'_fake_gpus': True" in str(info.value)


def test_devices_per_worker_and_fake_gpus():
    cpu = torch.device("cpu")
    assert learner_devices({"worker_index": 0, "num_gpus": 0, "num_gpus_per_worker": 3}) == [cpu]
    assert learner_devices({"worker_index": 0, "num_gpus": 0.5, "_fake_gpus": True}) == [cpu]
    assert learner_devices({"worker_index": 1, "num_gpus": 4, "num_gpus_per_worker": 2,
                            "_fake_gpus": True}) == [cpu, cpu]
    with pytest.raises(ValueError, match="two or more"):
        Towers(torch.nn.Linear(2, 2), [cpu])
    with pytest.raises(ValueError, match="'num_gpus'"):
        PPOTrainer(env="CartPole-v1", config={"num_gpus": -1})
    with pytest.raises(ValueError, match="'_fake_gpus'"):
        PPOTrainer(env="CartPole-v1", config={"_fake_gpus": "yes"})


def test_fake_gpus_reserve_no_ray_gpus():
    request = PPOTrainer.default_resource_request({"num_gpus": 2, "_fake_gpus": True, "num_workers": 1,
                                                   "num_gpus_per_worker": 1})
    assert [b.get("GPU", 0) for b in request.bundles] == [0, 0]
    request = PPOTrainer.default_resource_request({"num_gpus": 2, "num_workers": 1, "num_gpus_per_worker": 1})
    assert [b["GPU"] for b in request.bundles] == [2, 1]


def test_td3_several_optimizers_fake_towers_equal_one_tower(tmp_path):
    # Two optimizers (critic, actor through the critic, policy_delay): each tower's losses go
    # into its own copy's parameters of each optimizer, then into the first tower's.
    from rlfleet.algorithms.td3 import TD3Trainer

    config = {"actor_hiddens": [32], "critic_hiddens": [32], "learning_starts": 0, "timesteps_per_iteration": 200,
              "rollout_fragment_length": 200, "train_batch_size": 64, "min_iter_time_s": 0}
    one, many = _trainers(TD3Trainer, "Pendulum-v1", config, 2, tmp_path)
    try:
        one.train()
        batch = one.local_replay_buffer.sample(64)
        one.get_policy().set_state(many.get_policy().get_state())
        for _ in range(3):  # critic, critic + actor, critic (policy_delay 2)
            for t in (one, many):
                t.get_policy().learn_on_batch(batch.copy())
        _assert_same_weights(one, many)
    finally:
        one.stop(), many.stop()
