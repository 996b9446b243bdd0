"""Preprocessors: shapes, values, batch/write paths, checks, nesting."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rlfleet.models.preprocessors import (
    DictFlatteningPreprocessor,
    MultiBinaryPreprocessor,
    NoPreprocessor,
    OneHotPreprocessor,
    TupleFlatteningPreprocessor,
    get_preprocessor,
)

NESTED = spaces.Dict({
    "pos": spaces.Box(-1.0, 1.0, (2, 2), np.float64),
    "mode": spaces.Discrete(3, start=1),
    "inner": spaces.Tuple((spaces.MultiBinary(3), spaces.MultiDiscrete([2, 4]))),
    "img": spaces.Box(0, 255, (2, 2, 1), np.uint8),
})

SPACES = [
    spaces.Box(-2.0, 2.0, (3,), np.float32),
    spaces.Box(-np.inf, np.inf, (2, 3), np.float64),
    spaces.Discrete(5),
    spaces.Discrete(4, start=-2),
    spaces.MultiDiscrete([3, 2, 4]),
    spaces.MultiDiscrete([[2, 3], [4, 2]]),
    spaces.MultiBinary(4),
    spaces.MultiBinary((2, 3)),
    spaces.Tuple((spaces.Discrete(2), spaces.Box(0.0, 1.0, (2,)))),
    NESTED,
]


def _flat_reference(space, obs):
    # Gymnasium's own flattening is the ground truth for order and encoding.
    return spaces.flatten(space, obs).astype(np.float32)


@pytest.mark.parametrize("space", SPACES, ids=str)
def test_transform_batch_write_agree(space):
    space.seed(0)
    prep = get_preprocessor(space)
    samples = [space.sample() for _ in range(6)]
    for obs in samples:
        prep.check(obs)
    one = prep.transform(samples[0])
    assert one.shape == prep.shape and one.dtype == prep.dtype
    assert prep.size == int(np.prod(prep.shape))
    batch = prep.transform_batch(samples)
    assert batch.shape == (6,) + prep.shape and batch.dtype == prep.dtype
    buf = np.full((6, prep.size), -7.0, np.float32)
    for i, obs in enumerate(samples):
        prep.write(obs, buf[i], 0)
        np.testing.assert_array_equal(batch[i], prep.transform(obs))
        np.testing.assert_allclose(buf[i], _flat_reference(space, obs), rtol=1e-6)
    obs_space = prep.observation_space
    assert obs_space.shape == prep.shape and obs_space.dtype == prep.dtype
    assert obs_space.contains(one.astype(obs_space.dtype))


def test_box_keeps_shape_float32():
    prep = get_preprocessor(spaces.Box(0, 10, (2, 3), np.int64))
    assert isinstance(prep, NoPreprocessor) and prep.shape == (2, 3)
    out = prep.transform(np.arange(6).reshape(2, 3))
    assert out.dtype == np.float32 and out[1, 2] == 5.0
    assert prep.observation_space.dtype == np.float32
    # A float32 obs is passed through without a copy (hot path).
    x = np.ones(3, np.float32)
    assert get_preprocessor(spaces.Box(0, 1, (3,))).transform(x) is x


def test_uint8_image_stays_uint8():
    space = spaces.Box(0, 255, (8, 8, 3), np.uint8)
    prep = get_preprocessor(space)
    assert prep.dtype == np.uint8 and prep.shape == (8, 8, 3)
    assert prep.observation_space == space
    obs = space.sample()
    assert prep.transform(obs).dtype == np.uint8
    assert prep.transform_batch([obs, obs]).dtype == np.uint8
    # A uint8 vector (not an image) becomes float32.
    assert get_preprocessor(spaces.Box(0, 255, (4,), np.uint8)).dtype == np.float32


def test_one_hot_values():
    prep = get_preprocessor(spaces.Discrete(4))
    assert isinstance(prep, OneHotPreprocessor) and prep.shape == (4,)
    assert prep.transform(2).tolist() == [0, 0, 1, 0]
    assert prep.transform(np.int64(3)).tolist() == [0, 0, 0, 1]
    batch = prep.transform_batch(np.array([0, 3, 1]))
    np.testing.assert_array_equal(batch, np.eye(4, dtype=np.float32)[[0, 3, 1]])
    shifted = get_preprocessor(spaces.Discrete(3, start=-1))
    assert shifted.transform(-1).tolist() == [1, 0, 0]


def test_multi_discrete_concatenated_one_hots():
    prep = get_preprocessor(spaces.MultiDiscrete([2, 3]))
    assert prep.shape == (5,)
    assert prep.transform([1, 2]).tolist() == [0, 1, 0, 0, 1]
    np.testing.assert_array_equal(
        prep.transform_batch([[0, 0], [1, 1]]),
        [[1, 0, 1, 0, 0], [0, 1, 0, 1, 0]],
    )


def test_multi_binary_float():
    prep = get_preprocessor(spaces.MultiBinary(3))
    assert isinstance(prep, MultiBinaryPreprocessor)
    out = prep.transform(np.array([1, 0, 1], np.int8))
    assert out.dtype == np.float32 and out.tolist() == [1, 0, 1]


def test_write_at_offset_and_into_2d_row():
    prep = get_preprocessor(spaces.Discrete(3))
    row = np.full(7, 9.0, np.float32)
    prep.write(1, row, 2)
    assert row.tolist() == [9, 9, 0, 1, 0, 9, 9]
    img = get_preprocessor(spaces.Box(0, 1, (2, 2)))
    buf = np.zeros((3, 2, 2), np.float32)
    img.write(np.ones((2, 2)), buf[1], 0)  # a row of a [B, *shape] buffer
    assert buf[1].sum() == 4 and buf.sum() == 4
    with pytest.raises(ValueError, match="contiguous"):
        img.write(np.ones((2, 2)), np.zeros((2, 4), np.float32)[:, ::2], 0)


def test_dict_order_and_nesting():
    prep = get_preprocessor(NESTED)
    assert isinstance(prep, DictFlatteningPreprocessor)
    # Keys sorted as Gymnasium orders them: img(4), inner(3 + 6), mode(3), pos(4).
    assert prep.shape == (4 + 9 + 3 + 4,)
    obs = {
        "pos": np.array([[0.5, -0.5], [0.0, 1.0]]),
        "mode": 2,
        "inner": (np.array([1, 0, 1], np.int8), np.array([1, 3])),
        "img": np.full((2, 2, 1), 255, np.uint8),
    }
    out = prep.transform(obs)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[:4], [255] * 4)
    np.testing.assert_array_equal(out[4:13], [1, 0, 1, 0, 1, 0, 0, 0, 1])
    np.testing.assert_array_equal(out[13:16], [0, 1, 0])
    np.testing.assert_array_equal(out[16:], [0.5, -0.5, 0.0, 1.0])
    # Dict of stacked arrays, as Gymnasium vector envs return it.
    stacked = {
        "pos": np.stack([obs["pos"]] * 2),
        "mode": np.array([2, 2]),
        "inner": [obs["inner"]] * 2,
        "img": np.stack([obs["img"]] * 2),
    }
    np.testing.assert_array_equal(prep.transform_batch(stacked), np.stack([out, out]))


def test_tuple_nesting():
    space = spaces.Tuple((spaces.Tuple((spaces.Discrete(2),)), spaces.Box(0.0, 1.0, (1,))))
    prep = get_preprocessor(space)
    assert isinstance(prep, TupleFlatteningPreprocessor) and prep.shape == (3,)
    assert prep.transform(((1,), np.array([0.25]))).tolist() == [0, 1, 0.25]


def test_check_errors():
    box = get_preprocessor(spaces.Box(-1.0, 1.0, (3,), np.float32))
    box.check(np.zeros(3, np.float64))  # float64 obs for a float32 space is fine
    with pytest.raises(ValueError, match=r"shape=\(4,\)") as info:
        box.check(np.zeros(4))
    assert "Box" in str(info.value)
    with pytest.raises(ValueError, match="outside"):
        box.check(np.array([0.0, 2.0, 0.0]))
    with pytest.raises(ValueError, match="Discrete"):
        get_preprocessor(spaces.Discrete(3)).check(5)
    with pytest.raises(ValueError, match="MultiDiscrete"):
        get_preprocessor(spaces.MultiDiscrete([2, 2])).check([0, 2])
    nested = get_preprocessor(NESTED)
    bad = NESTED.sample()
    bad["mode"] = 7
    with pytest.raises(ValueError, match="'mode'"):
        nested.check(bad)
    missing = NESTED.sample()
    del missing["pos"]
    with pytest.raises(ValueError, match="keys"):
        nested.check(missing)
    with pytest.raises(ValueError, match="dict"):
        nested.check(np.zeros(3))


@pytest.mark.parametrize("space", [spaces.Text(5), spaces.Graph(spaces.Box(0, 1, (2,)), None),
                                   spaces.Sequence(spaces.Discrete(2))], ids=str)
def test_unsupported_space(space):
    with pytest.raises(ValueError, match=type(space).__name__):
        get_preprocessor(space)
