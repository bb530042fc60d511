"""Recording looks NumPy's type rules and scalar constants up in caches (``array._resolved``, ``ir.Scalar``):
a cached answer must never stand in for a different one. Zeros of either sign, NaN, equal values of other
Python types and the same constant in other dtypes each give NumPy's result (real PoCL kernels)."""

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
