"""Element-wise kernels over transposed operands (real OpenCL kernels on PoCL): the tiled variant that turns
the operand around in local memory, against the direct (strided) kernel and NumPy."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def _kinds():
    return [s.what for s in lang_session.session().last_plan.steps]


@pytest.mark.parametrize("coalesce", [True, False])
def test_transposed_operands_match_numpy(coalesce):
    sess = lang_session.session()
    sess.coalesce = coalesce
    rng = np.random.default_rng(11)
    try:
        for shape in ((70, 45), (3, 33, 65), (1, 40)):
            x = rng.random(shape).astype(np.float32)
            y = rng.random(shape[::-1]).astype(np.float32)
            ax, ay = anp.asarray(x), anp.asarray(y)
            got = ax * 2 + ay.T * ay.T - 1
            # atol: CUDA fuses multiply-adds (1 ulp of float32 where the result cancels towards 0)
            np.testing.assert_allclose(got.get(), x * 2 + y.T * y.T - 1, rtol=1e-6, atol=2e-7)
            tiled = any("tiled" in w for w in _kinds())
            assert tiled == (coalesce and len(shape) == 2 and min(shape) > 1)
        z = rng.random((4, 30, 50))
        az = anp.asarray(z)
        got = anp.where(az.transpose(0, 2, 1) > 0.5, az.transpose(0, 2, 1), 0.0) + 1  # a batch of tiles
        np.testing.assert_array_equal(got.get(), np.where(z.transpose(0, 2, 1) > 0.5, z.transpose(0, 2, 1), 0) + 1)
        assert any("tiled" in w for w in _kinds()) == coalesce
        b = rng.random((37, 41)) > 0.5
        np.testing.assert_array_equal((anp.asarray(b).T ^ True).get(), b.T ^ True)
        # a transposed view that is also read shifted, and written back into its own base
        a = anp.asarray(x := rng.random((33, 33)))
        ref = x.copy()
        a[1:, :] = a.T[1:, :] + a[:-1, :]
        ref[1:, :] = ref.T[1:, :] + ref[:-1, :]
        np.testing.assert_array_equal(a.get(), ref)
    finally:
        sess.coalesce = True
