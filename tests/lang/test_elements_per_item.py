"""Large element-wise kernels take several elements per work-item: same values as NumPy at every size
around the switch and the group boundaries, with and without work-group tuning, for every form of the
kernel (real PoCL kernels; NVRTC with ADAPTUNE_LANG_TEST_DEVICE=cuda)."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import fuse  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.tune import WorkGroupTuner  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def _switch() -> int:
    """The smallest size that gets more than one element per work-item on this device."""
    runtime = lang_session.session().runtime
    n = fuse.WAVES_FOR_MORE_PER_ITEM * fuse.ELEMENTS_PER_ITEM * 2048 * runtime.multiprocessors
    assert fuse.items_per_work_item(n - 1, runtime) == 1 and fuse.items_per_work_item(n, runtime) > 1
    return n


def _step(a, b, c):
    return (a * 2.0 - b) / (c + 1.0) + np.float32(0.5) * anp.sqrt(c)


@pytest.mark.parametrize("offset", [-1, 0, 512 + 3])
def test_values_match_numpy_around_the_switch_and_group_edges(offset):
    n = _switch() + offset
    rng = np.random.default_rng(n)
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    got = _step(anp.asarray(a), anp.asarray(b), anp.asarray(c))
    anp.flush()
    plan = lang_session.session().last_plan
    assert plan is not None and plan.steps[-1].per_item == fuse.items_per_work_item(n, lang_session.session().runtime)
    want = (a * 2.0 - b) / (c + 1.0) + np.float32(0.5) * np.sqrt(c)
    np.testing.assert_allclose(got.get(), want, rtol=2e-6, atol=1e-6)


def test_tuned_block_keeps_every_element(tmp_path):
    n = _switch() + 77
    sess = lang_session.session()
    sess.tuner = WorkGroupTuner(tmp_path / "lang.db", candidates=(64, 256), repeats=1, launches=1)
    x = np.arange(n, dtype=np.float32)
    try:
        got = anp.asarray(x) * 3.0 + 1.0
        anp.flush()
    finally:
        sess.tuner = None  # the module's other tests run untuned
    step = sess.last_plan.steps[-1]
    assert step.per_item > 1 and step.grid * step.block * step.per_item >= n > (step.grid - 1) * step.block * step.per_item
    np.testing.assert_array_equal(got.get(), x * 3.0 + 1.0)


def _arrays(n: int, dtype, k: int = 3):
    rng = np.random.default_rng(n)
    if np.dtype(dtype).kind == "f":
        return [rng.random(n).astype(dtype) + 0.5 for _ in range(k)]
    return [rng.integers(-1000, 1000, n).astype(dtype) for _ in range(k)]


# (name, the step on NumPy-like arrays, input dtypes, whether the work-items use 16-byte vectors: on CUDA, on
# OpenCL, where a kernel that also reads elsewhere keeps one element per part)
FORMS = [
    ("float32", lambda xp, a, b, c: (a * 2.0 - b) / c, (np.float32,) * 3, (True, True)),
    ("int32, two outputs", lambda xp, a, b, c: (a * 3 + b, b - c), (np.int32,) * 3, (True, True)),
    ("float64", lambda xp, a, b, c: a * b + c, (np.float64,) * 3, (False, False)),
    ("bool input", lambda xp, a, b, m: xp.where(m, a, b), (np.float32, np.float32, np.bool_), (False, False)),
    ("bool output", lambda xp, a, b, c: (a > b) & (c > 0.75), (np.float32,) * 3, (False, False)),
    ("shifted and broadcast reads", lambda xp, a, b, c: a[2:] - b[:-2] * c[:1], (np.float32,) * 3, (True, False)),
    ("shifted reads only (a stencil)", lambda xp, a, b, c: a[2:] + a[1:-1] - b[2:] * 2.0, (np.float32,) * 3,
     (True, False)),
]


@pytest.mark.parametrize("offset", [3, 512 + 3])
@pytest.mark.parametrize(("name", "step", "dtypes", "vector"), FORMS, ids=[f[0] for f in FORMS])
def test_each_kernel_form_matches_numpy(name, step, dtypes, vector, offset):
    """Every part of a work-item computes its own element: the whole work-groups (loads first, as vectors
    where every stream is a 4-byte type) and the last one (one part at a time) agree with NumPy."""
    n = _switch() + offset
    rng = np.random.default_rng(offset)
    host = [(rng.random(n) > 0.5) if dt == np.bool_ else _arrays(n, dt, 1)[0] for dt in dtypes]
    got = step(anp, *(anp.asarray(h) for h in host))
    anp.flush()
    src = lang_session.session().last_plan.steps[-1].source
    assert ("VSTORE4" in src) == vector[DEVICE == "opencl"], src[:400]
    want = step(np, *host)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        if w.dtype.kind == "f":  # CUDA contracts a * b + c into one rounding (FMA): a few ulps of the operands
            eps = 4 * np.finfo(w.dtype).eps
            np.testing.assert_allclose(g.get(), w, rtol=eps, atol=eps * float(np.abs(w).max()))
        else:
            np.testing.assert_array_equal(g.get(), w)


@pytest.mark.skipif(DEVICE != "cuda", reason="16-byte alignment: run with ADAPTUNE_LANG_TEST_DEVICE=cuda on a GPU")
def test_a_cupy_view_off_16_bytes_takes_the_plain_path():
    """A CuPy slice one element in is wrapped without a copy: its pointer is 4 bytes off a 16-byte vector,
    so every work-group must take the one-part-at-a-time path, and still compute every element."""
    import cupy as cp

    n = _switch() + 5
    host = _arrays(n + 1, np.float32, 2)
    a, b = (cp.asarray(h)[1:] for h in host)
    got = anp.asarray(a) * 2.0 + anp.asarray(b)
    anp.flush()
    assert "VLOAD4" in lang_session.session().last_plan.steps[-1].source
    np.testing.assert_array_equal(got.get(), host[0][1:] * np.float32(2.0) + host[1][1:])
