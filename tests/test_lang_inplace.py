"""In-place writes of adaptune.numpy (real OpenCL kernels on PoCL): ``a += b``, ``a[...] = expr`` and
``a[1:-1] = f(a[...])`` store into the existing buffer when no element the expression reads is written by
another work-item first; shifted, broadcast or transposed reads of the written array, copies and pending
readers of the old version get a fresh buffer. Every case is checked against NumPy."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def _storage(a):
    anp.flush()
    return a.base.node.data


@pytest.fixture
def x():
    return np.random.default_rng(3).random((9, 11))


def test_same_index_updates_write_in_place(x):
    y = x[::-1].copy()
    a, b = anp.asarray(x), anp.asarray(y)
    ref = x.copy()
    before = _storage(a)
    a += b
    ref += y
    stats = anp.flush()
    assert (stats.kernels, stats.inplace) == (1, 1)
    a[...] = a * 2 + 1
    ref[...] = ref * 2 + 1
    assert anp.flush().inplace == 1
    a[1:-1, 2:] = a[1:-1, 2:] * 3 - b[1:-1, 2:]  # a region, read at the index it writes
    ref[1:-1, 2:] = ref[1:-1, 2:] * 3 - y[1:-1, 2:]
    assert anp.flush().inplace == 1
    a[::2, 1] = 7.0  # a strided region from a scalar
    ref[::2, 1] = 7.0
    assert anp.flush().inplace == 1
    a.T[3, 1:] += 1  # through a transposed view: a column of a, read where it is written
    ref.T[3, 1:] += 1
    assert anp.flush().inplace == 1
    assert _storage(a) is before
    # CUDA contracts a * 3 - b into one fused multiply-add (NVRTC's default): 1-ulp differences from NumPy
    np.testing.assert_allclose(a.get(), ref, rtol=1e-14)
    np.testing.assert_array_equal(b.get(), y)
    # two updates recorded without a flush in between: the second reads the first's unflushed result,
    # so the pair is computed into fresh buffers (chains are not written in place)
    a[0] = 1.0
    a[1] = a[1] + 1
    ref[0] = 1.0
    ref[1] = ref[1] + 1
    assert anp.flush().inplace == 0
    np.testing.assert_allclose(a.get(), ref, rtol=1e-14)


@pytest.mark.parametrize("case", ["shifted", "broadcast", "transposed", "reversed"])
def test_overlapping_reads_get_a_copy(case):
    h = np.random.default_rng(4).random((8, 8))
    a, ref = anp.asarray(h), h.copy()
    before = _storage(a)
    if case == "shifted":
        a[1:-1] = a[:-2] + a[2:]
        ref[1:-1] = ref[:-2] + ref[2:]
    elif case == "broadcast":
        a[1:] = a[0] * 2
        ref[1:] = ref[0] * 2
    elif case == "transposed":
        a[...] = a.T + 1
        ref[...] = ref.T + 1
    else:
        a[:] = a[::-1] * 1.5
        ref[:] = ref[::-1] * 1.5
    assert anp.flush().inplace == 0
    assert _storage(a) is not before
    np.testing.assert_array_equal(a.get(), ref)


def test_copies_and_pending_readers_keep_the_old_version(x):
    a = anp.asarray(x)
    snap = a.copy()  # shares the buffer: a must not be overwritten in place
    a += 1
    assert anp.flush().inplace == 0
    np.testing.assert_array_equal(snap.get(), x)
    np.testing.assert_array_equal(a.get(), x + 1)
    # a reader of the old version in an earlier (same-level) kernel: the write still goes in place
    b = anp.asarray(x)
    doubled = b * 2
    total = b.sum()
    b += 1
    assert anp.flush().inplace == 1
    np.testing.assert_array_equal(doubled.get(), x * 2)
    assert float(total) == pytest.approx(x.sum())
    np.testing.assert_array_equal(b.get(), x + 1)
    # a reader that needs the old version after a reduction (a later kernel): no in-place write
    c = anp.asarray(x)
    later = c + c.sum()
    c += 1
    assert anp.flush().inplace == 0
    np.testing.assert_allclose(later.get(), x + x.sum(), rtol=1e-12)
    np.testing.assert_array_equal(c.get(), x + 1)
    # the in-place result feeds a later kernel in the same flush
    d = anp.asarray(x)
    d *= 3
    s = d.sum(axis=0)
    assert anp.flush().inplace == 1
    np.testing.assert_allclose(s.get(), (x * 3).sum(axis=0), rtol=1e-12)


def test_views_see_in_place_writes_like_numpy(x):
    a, ref = anp.asarray(x), x.copy()
    row = a[2]
    col = a[:, 3]
    a *= -1
    ref *= -1
    np.testing.assert_array_equal(row.get(), ref[2])
    np.testing.assert_array_equal(col.get(), ref[:, 3])
    row += 10  # through a view: the base is updated in place too
    ref[2] += 10
    np.testing.assert_array_equal(a.get(), ref)


def test_shallow_water_updates_share_an_in_place_kernel():
    rng = np.random.default_rng(5)
    hs, us, vs = (rng.random((12, 14)) for _ in range(3))
    h, u, v = anp.asarray(hs), anp.asarray(us), anp.asarray(vs)
    storage = [_storage(h), _storage(u), _storage(v)]
    for _ in range(2):
        for hh, uu, vv in ((h, u, v), (hs, us, vs)):
            uu[1:-1, 1:-1] = uu[1:-1, 1:-1] - 0.1 * (hh[1:-1, 2:] - hh[1:-1, :-2])
            vv[1:-1, 1:-1] = vv[1:-1, 1:-1] - 0.1 * (hh[2:, 1:-1] - hh[:-2, 1:-1])
            hh[1:-1, 1:-1] = hh[1:-1, 1:-1] - 0.1 * ((uu[1:-1, 2:] - uu[1:-1, :-2]) + (vv[2:, 1:-1] - vv[:-2, 1:-1]))
        stats = anp.flush()
        assert (stats.kernels, stats.inplace) == (2, 3)  # u and v in one kernel, then h: all in place
    assert all(now is before for now, before in zip((_storage(h), _storage(u), _storage(v)), storage, strict=True))
    for got, want in ((h, hs), (u, us), (v, vs)):
        np.testing.assert_allclose(got.get(), want, rtol=1e-12)
