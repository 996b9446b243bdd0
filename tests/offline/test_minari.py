"""input: "minari:<dataset id>": a Minari dataset made here (never downloaded) read as batches."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

minari = pytest.importorskip("minari")

from rlfleet.algorithms.bc import BCTrainer  # noqa: E402
from rlfleet.offline.json_format import OfflineDataError  # noqa: E402
from rlfleet.offline.minari_input import MinariReader  # noqa: E402
from rlfleet.policy.sample_batch import SampleBatch  # noqa: E402

SB = SampleBatch


def _balance(obs) -> int:
    # A decent CartPole controller: push towards the pole's lean (angle + angular velocity).
    return int(obs[2] + 0.5 * obs[3] > 0)


@pytest.fixture
def cartpole_dataset(tmp_path, monkeypatch):
    from minari.data_collector import EpisodeBuffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = gym.make("CartPole-v1")
    episodes, lengths = [], []
    for k in range(6):
        o, _ = env.reset(seed=k)
        obs, acts, rews, terms, truncs = [o], [], [], [], []
        done = False
        while not done:
            a = _balance(o)
            o, r, t, tr, _ = env.step(a)
            obs.append(o), acts.append(a), rews.append(r), terms.append(t), truncs.append(tr)
            done = t or tr
        lengths.append(len(acts))
        episodes.append(EpisodeBuffer(id=k, observations=obs, actions=acts, rewards=rews, terminations=terms,
                                      truncations=truncs))
    minari.create_dataset_from_buffers("cartpole/balance-v0", episodes, env=env, algorithm_name="scripted")
    return "cartpole/balance-v0", lengths


def test_minari_episodes_become_batches(cartpole_dataset):
    dataset_id, lengths = cartpole_dataset
    reader = MinariReader(dataset_id)
    batch = reader.next()
    ends = np.flatnonzero(batch[SB.DONES])
    assert len(ends) >= 1 and ends[-1] == batch.count - 1  # whole episodes only
    first_len = int(ends[0]) + 1
    assert first_len in lengths
    np.testing.assert_array_equal(batch[SB.T][:first_len], np.arange(first_len))
    np.testing.assert_array_equal(batch[SB.OBS][1:first_len], batch[SB.NEXT_OBS][:first_len - 1])
    assert batch[SB.OBS].dtype == np.float32 and batch[SB.ACTIONS].dtype.kind == "i"
    assert set(np.unique(batch[SB.EPS_ID][:first_len])) == {batch[SB.EPS_ID][0]}


def test_bc_learns_from_a_minari_dataset(cartpole_dataset, tmp_path):
    dataset_id, lengths = cartpole_dataset
    trainer = BCTrainer(env="CartPole-v1", logdir=str(tmp_path / "run"), config={
        "input": f"minari:{dataset_id}", "seed": 0, "lr": 1e-2, "train_batch_size": 1000,
        "model": {"fcnet_hiddens": [32]}, "evaluation_interval": 5, "evaluation_num_episodes": 5,
        "evaluation_config": {"input": "sampler"}})
    try:
        first = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"]
        for _ in range(19):
            result = trainer.train()
        # The data has no action probabilities: training goes on without IS/WIS.
        assert not result["off_policy_estimator"]
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"] < first
        # Random play lasts ~22 steps; measured here (seed 0): 56-103 over iterations 5-30.
        assert result["evaluation"]["episode_reward_mean"] >= 45, result["evaluation"]["episode_reward_mean"]
    finally:
        trainer.stop()


def test_minari_errors_name_the_dataset(cartpole_dataset, tmp_path):
    dataset_id, _ = cartpole_dataset
    with pytest.raises(OfflineDataError, match="minari:cartpole/missing-v0.*cannot be loaded"):
        MinariReader("cartpole/missing-v0")
    with pytest.raises(Exception, match=r"minari:cartpole/balance-v0.*space"):
        BCTrainer(env="Pendulum-v1", logdir=str(tmp_path / "p"), config={"input": f"minari:{dataset_id}"})
