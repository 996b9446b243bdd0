"""Observation filters against NumPy statistics."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlfleet.utils.filters import (
    FilterManager,
    MeanStdFilter,
    NoFilter,
    RunningStat,
    get_filter,
)


def _assert_stat(rs: RunningStat, data: np.ndarray) -> None:
    assert rs.n == len(data)
    np.testing.assert_allclose(rs.mean, data.mean(axis=0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rs.var, data.var(axis=0, ddof=1), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(rs.std, data.std(axis=0, ddof=1), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("shape", [(), (3,), (2, 4)])
def test_push_matches_numpy(shape):
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(200,) + shape)
    rs = RunningStat(shape)
    for x in data:
        rs.push(x)
    _assert_stat(rs, data)


@pytest.mark.parametrize("shape", [(), (3,), (2, 4)])
def test_push_batch_matches_numpy(shape):
    rng = np.random.default_rng(1)
    data = rng.normal(-1.0, 5.0, size=(300,) + shape)
    rs = RunningStat(shape)
    for chunk in np.array_split(data, [1, 7, 150, 150]):  # includes size-1 and empty chunks
        rs.push_batch(chunk)
    _assert_stat(rs, data)


def test_merge_of_several_stats_equals_concatenation():
    rng = np.random.default_rng(2)
    parts = [rng.normal(i, i + 1.0, size=(n, 5)) for i, n in enumerate([1, 10, 37, 0, 100])]
    stats = []
    for p in parts:
        s = RunningStat((5,))
        s.push_batch(p)
        stats.append(s)
    total = RunningStat((5,))
    for s in stats:
        total.update(s)
    _assert_stat(total, np.concatenate(parts))
    # Merging into a non-empty stat (mixed push / update) too.
    mixed = RunningStat((5,))
    for x in parts[2]:
        mixed.push(x)
    mixed.update(stats[4])
    _assert_stat(mixed, np.concatenate([parts[2], parts[4]]))


def test_small_n_convention_and_copy():
    rs = RunningStat((2,))
    np.testing.assert_array_equal(rs.var, [0.0, 0.0])
    rs.push([3.0, -2.0])
    np.testing.assert_array_equal(rs.var, [9.0, 4.0])  # mean**2 when n < 2
    c = rs.copy()
    c.push([0.0, 0.0])
    assert rs.n == 1 and c.n == 2


def test_shape_mismatch_errors():
    rs = RunningStat((3,))
    with pytest.raises(ValueError, match="shape"):
        rs.push([1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        rs.push_batch(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="shape"):
        rs.update(RunningStat((2,)))


def test_no_filter():
    f = NoFilter()
    out = f([1, 2, 3])
    assert out.dtype == np.float32 and out.tolist() == [1, 2, 3]
    assert f.apply_batch(np.zeros((4, 2), np.float64)).dtype == np.float32
    assert f.get_state() == {}


def test_mean_std_filter_normalises():
    rng = np.random.default_rng(3)
    data = rng.normal([5.0, -3.0], [2.0, 0.5], size=(2000, 2))
    f = MeanStdFilter((2,), clip=None)
    f.apply_batch(data)
    out = f.apply_batch(data, update=False)
    assert out.dtype == np.float32 and out.shape == data.shape
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=0, ddof=1), 1.0, atol=1e-5)
    # Single-observation call equals the batch path.
    np.testing.assert_allclose(f(data[0], update=False), out[0], rtol=1e-6)
    assert f.rs.n == 2000 and f.buffer.n == 2000


def test_mean_std_filter_call_updates_and_clips():
    f = MeanStdFilter((1,), clip=2.0)
    for v in [0.0, 1.0, 0.0, 1.0]:
        f([v])
    assert f.rs.n == 4 and f.buffer.n == 4
    assert f([1000.0], update=False)[0] == pytest.approx(2.0)
    assert f.rs.n == 4
    expected = (0.75 - f.rs.mean[0]) / (f.rs.std[0] + 1e-8)
    assert f([0.75], update=False)[0] == pytest.approx(expected, rel=1e-6)
    g = MeanStdFilter((1,), demean=False, destd=False)
    g([5.0])
    assert g([3.0], update=False)[0] == pytest.approx(3.0)


def test_apply_changes_copy_sync_clear():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(50, 3)), rng.normal(2.0, size=(30, 3))
    f1, f2 = MeanStdFilter((3,)), MeanStdFilter((3,))
    f1.apply_batch(a)
    f2.apply_batch(b)
    f1.apply_changes(f2, with_buffer=False)
    _assert_stat(f1.rs, np.concatenate([a, b]))
    _assert_stat(f1.buffer, a)
    f3 = MeanStdFilter((3,))
    f3.apply_batch(a)
    f3.apply_changes(f2, with_buffer=True)
    _assert_stat(f3.buffer, np.concatenate([a, b]))

    c = f1.copy()
    c.apply_batch(b)
    assert f1.rs.n == 80 and c.rs.n == 110

    f2.sync(f1)
    _assert_stat(f2.rs, np.concatenate([a, b]))
    f2.clear_buffer()
    assert f2.buffer.n == 0 and f2.rs.n == 80


def test_filter_manager_synchronize():
    rng = np.random.default_rng(5)
    local = {"default_policy": MeanStdFilter((4,))}
    local_data = rng.normal(size=(20, 4))
    local["default_policy"].apply_batch(local_data)
    remotes = [{"default_policy": MeanStdFilter((4,))} for _ in range(3)]
    all_data = [local_data]
    for r in remotes:
        d = rng.normal(rng.uniform(-3, 3), rng.uniform(0.5, 3), size=(rng.integers(5, 60), 4))
        r["default_policy"].apply_batch(d)
        all_data.append(d)

    FilterManager.synchronize(local, remotes, update_remote=True)
    _assert_stat(local["default_policy"].rs, np.concatenate(all_data))
    for r in remotes:
        f = r["default_policy"]
        assert f.buffer.n == 0
        np.testing.assert_array_equal(f.rs.mean, local["default_policy"].rs.mean)
        assert f.rs.n == local["default_policy"].rs.n

    # Second round: only the new data is merged, nothing is counted twice.
    more = []
    for r in remotes:
        d = rng.normal(size=(10, 4))
        r["default_policy"].apply_batch(d)
        more.append(d)
    FilterManager.synchronize(local, remotes)
    _assert_stat(local["default_policy"].rs, np.concatenate(all_data + more))
    assert all(r["default_policy"].rs.n == local["default_policy"].rs.n for r in remotes)


def test_filter_manager_without_update_remote():
    local = {"p": MeanStdFilter((1,))}
    remote = {"p": MeanStdFilter((1,))}
    remote["p"].apply_batch(np.ones((5, 1)))
    FilterManager.synchronize(local, [remote], update_remote=False)
    assert local["p"].rs.n == 5 and remote["p"].buffer.n == 0 and remote["p"].rs.n == 5


def test_filter_manager_missing_key():
    with pytest.raises(ValueError, match="no filter for 'p'"):
        FilterManager.synchronize({"p": MeanStdFilter((1,))}, [{"q": MeanStdFilter((1,))}])


def test_state_round_trip_is_plain_data(tmp_path):
    rng = np.random.default_rng(6)
    f = MeanStdFilter((2, 3), demean=True, destd=False, clip=5.0)
    f.apply_batch(rng.normal(size=(40, 2, 3)))
    f.clear_buffer()
    f.apply_batch(rng.normal(size=(7, 2, 3)))
    state = f.get_state()
    for v in state.values():
        assert isinstance(v, (np.ndarray, int, float, bool))

    # Through .npz without pickle, as checkpoints store it.
    np.savez(tmp_path / "f.npz", **state)
    with np.load(tmp_path / "f.npz", allow_pickle=False) as z:
        loaded = {k: z[k] for k in z.files}
    g = MeanStdFilter((1,))
    g.set_state(loaded)
    assert g.shape == (2, 3) and g.demean and not g.destd and g.clip == 5.0
    assert g.rs.n == 47 and g.buffer.n == 7
    np.testing.assert_array_equal(g.rs.mean, f.rs.mean)
    np.testing.assert_array_equal(g.buffer.m2, f.buffer.m2)
    x = rng.normal(size=(2, 3))
    np.testing.assert_array_equal(g(x, update=False), f(x, update=False))

    # Scalars are JSON-friendly.
    json.dumps({k: v for k, v in state.items() if not isinstance(v, np.ndarray)})

    no_clip = MeanStdFilter((1,), clip=None)
    h = MeanStdFilter((1,))
    h.set_state(no_clip.get_state())
    assert h.clip is None


def test_get_filter():
    assert isinstance(get_filter("NoFilter", (3,)), NoFilter)
    f = get_filter("MeanStdFilter", (3,))
    assert isinstance(f, MeanStdFilter) and f.shape == (3,) and f.clip is None
    custom = get_filter(lambda shape: MeanStdFilter(shape, clip=1.0), (2,))
    assert custom.clip == 1.0 and custom.shape == (2,)
    with pytest.raises(ValueError) as info:
        get_filter("MeanStd", (3,))
    msg = str(info.value)
    assert "observation_filter" in msg and "'MeanStd'" in msg and "MeanStdFilter" in msg
