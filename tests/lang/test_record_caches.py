"""Recording looks up in caches what does not change from one step to the next: NumPy's type rules and scalar
constants (``array._resolved``, ``ir.Scalar``), basic indices per view (``array._basic_index``), broadcast
strides, reduction dtypes and axes, and whether a view is its whole base. A cached answer must never stand in
for a different one: zeros of either sign, NaN, equal values of other Python types, the same constant in other
dtypes, the same index on other views, look-alike indices and errors each give NumPy's result (real PoCL
kernels)."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def test_signed_zeros_and_nan_constants_are_never_confused():
    x = np.array([1.0, -2.0, 3.0], np.float32)
    a = anp.asarray(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        for s in (0.0, -0.0, 0.0, -0.0, float("nan"), 0.0):  # equal (or unequal to itself), different bits
            r = 1.0 / (a * s)  # the sign of the zero decides the sign of the infinity
            np.testing.assert_array_equal(r.get(), np.float32(1.0) / (x * np.float32(s)))


def test_one_constant_in_two_dtypes_and_equal_values_of_other_types():
    x32 = np.linspace(0, 1, 16, dtype=np.float32)
    x64 = np.linspace(0, 1, 16)
    a32, a64 = anp.asarray(x32), anp.asarray(x64)
    for _ in range(2):
        np.testing.assert_array_equal((a32 * 0.1).get(), x32 * 0.1)  # 0.1 as float32
        np.testing.assert_array_equal((a64 * 0.1).get(), x64 * 0.1)  # the same 0.1 as float64: other bits
    flags = np.array([True, False, True])
    b = anp.asarray(flags)
    for other in (True, 1, 1.0, True):  # equal and hashing alike, but NumPy types them apart
        got, want = b + other, flags + other
        assert got.dtype == want.dtype, other
        np.testing.assert_array_equal(got.get(), want)


def test_basic_index_cache_keys_on_the_view_and_the_index():
    """``a[k]`` is worked out once per (view, index) and then looked up: the same index on other views, and
    look-alike indices (an int and a slice, -1 and a slice to -1), must each give NumPy's result."""
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    a = anp.asarray(x)
    views = [(a, x), (a[1:], x[1:]), (a[:, ::2], x[:, ::2]), (a.T, x.T), (a[..., 1:4], x[..., 1:4])]
    keys = [(None, slice(None)), (slice(None), None), 1, -1, slice(1, None), slice(None, -1), slice(-1, None),
            (Ellipsis, 0), (0, Ellipsis, None), (slice(None, None, -1),), (slice(1, 2), 0), np.int64(1)]
    for _ in range(2):  # the second round is served from the cache
        for v, xv in views:
            for k in keys:
                np.testing.assert_array_equal((v[k] * 1).get(), xv[k] * 1, err_msg=f"{xv.shape} {k!r}")
    for _ in range(2):  # errors are never cached: each time NumPy's exception type
        with pytest.raises(IndexError):
            a[3]
        with pytest.raises(IndexError):
            a[0, 0, 0, 0]
        with pytest.raises(IndexError):
            a[..., ...]


def test_a_view_of_a_base_updated_in_place_reads_the_new_value():
    """A whole view reads its base's current node (known when the view is made): writes through another
    view of the same base show in it, as in NumPy."""
    x = np.zeros((4, 4), np.float32)
    a = anp.asarray(x)
    whole, row = a[...], a[1]
    a[1:3] = 5.0
    x[1:3] = 5.0
    row += 1
    x[1] += 1
    np.testing.assert_array_equal(whole.get(), x)
    np.testing.assert_array_equal((a + whole).get(), x + x)
    np.testing.assert_array_equal((a.T + a).get(), x.T + x)  # same shape, offset and base: not the whole base
    np.testing.assert_array_equal((a[::-1, ::-1] * 1).get(), x[::-1, ::-1])


def test_broadcasting_binary_operations_and_their_errors():
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    a = anp.asarray(x)
    col = anp.asarray(x.reshape(6, 1))
    s = anp.asarray(np.float32(2.0))  # 0-d
    for _ in range(2):
        np.testing.assert_array_equal((a[None, :] - a[:, None]).get(), x[None, :] - x[:, None])
        np.testing.assert_array_equal((col / a).get(), x.reshape(6, 1) / x)
        np.testing.assert_array_equal((s * a).get(), np.float32(2.0) * x)
        np.testing.assert_array_equal((a + s).get(), x + np.float32(2.0))
        with pytest.raises(ValueError, match="broadcast"):
            a + anp.asarray(np.ones(4, np.float32))


def test_reductions_over_one_axis_and_their_errors():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    a = anp.asarray(x)
    for _ in range(2):
        for axis in (0, 1, 2, -1, -3):
            got, want = a.sum(axis=axis), x.sum(axis=axis)
            assert got.dtype == want.dtype  # int32 sums accumulate in int64, as NumPy's
            np.testing.assert_array_equal(got.get(), want)
        np.testing.assert_array_equal(anp.asarray(x > 5).sum(axis=1).get(), (x > 5).sum(axis=1))
        for axis in (3, -4):
            with pytest.raises(np.exceptions.AxisError):
                a.sum(axis=axis)
