"""Small intermediates stay allocated with their plan: a repeated flush allocates only what it returns,
and reusing the scratch never changes a result (real PoCL kernels, in-order queue)."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def test_repeated_flush_allocates_only_its_results_and_stays_exact():
    rt = lang_session.session().runtime
    real = rt.alloc
    calls: list[int] = []

    def counting(n, dtype):
        calls.append(n)
        return real(n, dtype)

    rng = np.random.default_rng(5)
    rt.alloc = counting
    try:
        per_flush = []
        for _ in range(3):
            x = rng.random((48, 3000))
            a = anp.asarray(x)
            out = (a * 2).sum(axis=1) * 0.5 - a[:, 0]  # reduction (partials, result) feeding an element-wise root
            calls.clear()
            anp.flush()
            per_flush.append(len(calls))
            np.testing.assert_allclose(out.get(), x.sum(axis=1) - x[:, 0], rtol=1e-12)
        plan = lang_session.session().last_plan
    finally:
        rt.alloc = real
    assert plan.scratch, "the plan has intermediates to pool"
    assert per_flush[0] == per_flush[1] + len(plan.scratch)  # first flush: results + scratch; then results only
    assert per_flush[1] == per_flush[2] == 1
