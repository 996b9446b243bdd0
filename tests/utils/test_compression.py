"""compress_observations: LZ4-compressed observation columns, from the sampler to the learner."""
from __future__ import annotations

import io

import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env.examples import BrightPixelEnv
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay.buffers import ReplayBuffer
from rlfleet.utils.compression import compress, decompress, decompress_columns, is_compressed

SB = SampleBatch


def _images(n: int, noise: int = 40, seed: int = 0) -> np.ndarray:
    env = BrightPixelEnv({"noise": noise})
    obs, _ = env.reset(seed=seed)
    rows = [obs]
    for _ in range(n - 1):
        obs, _, _, truncated, _ = env.step(0)
        if truncated:
            obs, _ = env.reset()
        rows.append(obs)
    return np.stack(rows)


@pytest.mark.parametrize("array", [
    _images(7),
    np.random.default_rng(0).normal(size=(5, 3, 2)).astype(np.float32),
    np.arange(6, dtype=np.int64),
    np.zeros((4, 8), bool),
    np.zeros((3, 0), np.float32),
], ids=["uint8-images", "float32", "int64-scalars", "bool", "empty-rows"])
def test_round_trip_is_exact(array):
    packed = compress(array)
    assert is_compressed(packed) and packed.shape == (len(array),)
    out = decompress(packed)
    assert out.dtype == array.dtype and out.shape == array.shape
    np.testing.assert_array_equal(out, array)


def test_rows_ending_in_zero_bytes_survive():
    # Indexing an `S` array strips trailing zero bytes; compress/decompress must not.
    array = np.zeros((3, 16), np.uint8)
    array[1, 0] = 7
    np.testing.assert_array_equal(decompress(compress(array)), array)


def test_batch_operations_keep_working_on_compressed_columns():
    a = SampleBatch({SB.OBS: compress(_images(6, noise=0)), SB.EPS_ID: np.array([1, 1, 1, 2, 2, 2]),
                     SB.REWARDS: np.arange(6, dtype=np.float32)})
    b = SampleBatch({SB.OBS: compress(_images(4, noise=40, seed=1)), SB.EPS_ID: np.array([3, 3, 3, 3]),
                     SB.REWARDS: np.arange(4, dtype=np.float32)})
    # Different widths: concatenation widens the narrower column (zero padding).
    assert a[SB.OBS].itemsize != b[SB.OBS].itemsize
    both = SampleBatch.concat_samples([a, b])
    expected = np.concatenate([decompress(a[SB.OBS]), decompress(b[SB.OBS])])
    np.testing.assert_array_equal(decompress(both[SB.OBS]), expected)
    np.testing.assert_array_equal(decompress(both.slice(2, 7)[SB.OBS]), expected[2:7])
    np.testing.assert_array_equal(decompress(both.take(np.array([9, 0, 4]))[SB.OBS]), expected[[9, 0, 4]])
    episodes = both.split_by_episode()
    assert [e.count for e in episodes] == [3, 3, 4]
    np.testing.assert_array_equal(decompress(episodes[2][SB.OBS]), expected[6:])
    shuffled = both.copy().shuffle(np.random.default_rng(0))
    order = shuffled[SB.REWARDS].astype(int) + np.where(shuffled[SB.EPS_ID] == 3, 6, 0)
    np.testing.assert_array_equal(decompress(shuffled[SB.OBS]), expected[order])
    # Persistable without pickle.
    buf = io.BytesIO()
    np.savez(buf, **both)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as loaded:
        np.testing.assert_array_equal(decompress(loaded[SB.OBS]), expected)
    # decompress_columns leaves the compact batch alone.
    full = decompress_columns(both)
    assert isinstance(full, SampleBatch) and is_compressed(both[SB.OBS])
    np.testing.assert_array_equal(full[SB.OBS], expected)


def test_replay_buffer_widens_for_longer_compressed_rows():
    buffer = ReplayBuffer(8, seed=0)
    small = _images(3, noise=0)
    large = _images(3, noise=40, seed=2)
    buffer.add(SampleBatch({SB.OBS: compress(small)}))
    buffer.add(SampleBatch({SB.OBS: compress(large)}))  # wider: must not be truncated
    stored = decompress(buffer._storage[SB.OBS][:6])
    np.testing.assert_array_equal(stored, np.concatenate([small, large]))
    sampled = buffer.sample(5)
    assert is_compressed(sampled[SB.OBS]) and decompress(sampled[SB.OBS]).shape == (5, 42, 42, 3)


def test_compressed_batch_is_smaller_for_compressible_images():
    images = _images(200, noise=0)
    batch = SampleBatch({SB.OBS: images})
    compact = SampleBatch({SB.OBS: compress(images)})
    # A black background with one bright square: LZ4 shrinks it many times over.
    assert batch.size_bytes() > 10 * compact.size_bytes(), (batch.size_bytes(), compact.size_bytes())
    # Pure noise (the default BrightPixelEnv background) does not compress: the header and
    # LZ4 framing cost at most a few percent.
    noisy = _images(200, noise=40)
    assert compress(noisy).nbytes < 1.05 * noisy.nbytes


@pytest.mark.parametrize("noise", [0, 40])
def test_ppo_trains_with_compress_observations(noise):
    trainer = PPOTrainer(env=BrightPixelEnv, config={
        "env_config": {"noise": noise}, "seed": 0, "compress_observations": True, "num_envs_per_worker": 2,
        "rollout_fragment_length": 16, "train_batch_size": 32, "sgd_minibatch_size": 16, "num_sgd_iter": 1,
    })
    try:
        batch = trainer.workers.local_worker().sample()
        policy_batch = batch.policy_batches["default_policy"] if hasattr(batch, "policy_batches") else batch
        assert is_compressed(policy_batch[SB.OBS]) and is_compressed(policy_batch[SB.NEXT_OBS])
        assert decompress(policy_batch[SB.OBS]).shape == (policy_batch.count, 42, 42, 3)
        for _ in range(2):
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"]), stats
    finally:
        trainer.stop()


def test_compress_observations_off_keeps_plain_arrays():
    trainer = PPOTrainer(env=BrightPixelEnv, config={
        "seed": 0, "rollout_fragment_length": 8, "train_batch_size": 8, "sgd_minibatch_size": 8,
    })
    try:
        batch = trainer.workers.local_worker().sample()
        policy_batch = batch.policy_batches["default_policy"] if hasattr(batch, "policy_batches") else batch
        assert policy_batch[SB.OBS].dtype == np.uint8 and policy_batch[SB.OBS].shape[1:] == (42, 42, 3)
    finally:
        trainer.stop()


def test_multi_agent_sampler_compresses_too():
    from rlfleet.env.multi_agent_env import make_multi_agent

    two_pixels = make_multi_agent(lambda ctx: BrightPixelEnv({"noise": 0}))
    trainer = PPOTrainer(env=two_pixels, config={
        "seed": 0, "compress_observations": True, "rollout_fragment_length": 16, "train_batch_size": 32,
        "sgd_minibatch_size": 16, "num_sgd_iter": 1,
        "multiagent": {"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, *a, **k: f"p{aid}"},
    })
    try:
        batch = trainer.workers.local_worker().sample()
        assert set(batch.policy_batches) == {"p0", "p1"}
        for policy_batch in batch.policy_batches.values():
            assert is_compressed(policy_batch[SB.OBS]) and is_compressed(policy_batch[SB.NEXT_OBS])
            assert decompress(policy_batch[SB.NEXT_OBS]).shape == (policy_batch.count, 42, 42, 3)
        stats = trainer.train()["info"]["learner"]["p1"]["learner_stats"]
        assert np.isfinite(stats["total_loss"]), stats
    finally:
        trainer.stop()
