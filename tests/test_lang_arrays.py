"""adaptune.numpy against NumPy on real OpenCL kernels (PoCL in CI): values, fusion, cache, errors."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")  # "cuda" runs the same tests through NVRTC
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.eager import FallbackWarning, evaluate_eagerly  # noqa: E402
from adaptune.lang.runtime import KernelCompileError  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_elementwise_broadcasting_and_dtypes(rng):
    x = rng.random((4, 5)).astype(np.float32)
    y = rng.random(5)
    i = rng.integers(-9, 9, (4, 5)).astype(np.int32)
    ax, ay, ai = anp.asarray(x), anp.asarray(y), anp.asarray(i)
    cases = [
        (ax * 2.5 + 1, x * 2.5 + 1),
        (ax - ay, x - y),  # float32 with float64 -> float64, broadcast over rows
        (ai // 1 if False else ai * 3 - 1, i * 3 - 1),
        (ai / 2, i / 2),
        (anp.sqrt(ax) + anp.exp(-ax) * anp.sin(ay), np.sqrt(x) + np.exp(-x) * np.sin(y)),
        (anp.maximum(ax, 0.5), np.maximum(x, 0.5)),
        (anp.where(ax > 0.5, ax, -ax), np.where(x > 0.5, x, -x)),
        ((ax > 0.3) & (ax < 0.7), (x > 0.3) & (x < 0.7)),
        (abs(ai), np.abs(i)),
        (ax ** 2, x ** 2),
        (ax[:, None, :3] * ay[None, :3, None], x[:, None, :3] * y[None, :3, None]),
    ]
    cases += [(ai * 2, i * 2), (ai * 2.0, i * 2.0), (ai * True, i * True)]  # 2, 2.0, True: one cache key each
    for got, want in cases:
        out = got.get()
        assert out.dtype == want.dtype, (out.dtype, want.dtype)
        assert out.shape == want.shape
        np.testing.assert_allclose(out, want, rtol=1e-6)


def test_views_stencil_and_aliasing_in_place(rng):
    h = rng.random((9, 11))
    a = anp.asarray(h)
    ref = h.copy()
    for _ in range(3):
        ref[1:-1, 1:-1] = 0.2 * (ref[1:-1, 1:-1] + ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2] + ref[1:-1, 2:])
        a[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
        stats = anp.flush()
        assert stats.kernels == 1  # the whole Jacobi step is one kernel
    np.testing.assert_array_equal(a.get(), ref)
    # a view aliases its base; a copy does not
    center = a[2:-2, ::2]
    snapshot = a.copy()
    center[:] = 0
    ref[2:-2, ::2] = 0
    a[::-1, 0] = anp.arange(9.0)
    ref[::-1, 0] = np.arange(9.0)
    a[3] += 1
    ref[3] += 1
    np.testing.assert_array_equal(a.get(), ref)
    assert not np.array_equal(snapshot.get(), ref)
    np.testing.assert_array_equal(a.T[1:3, ::-2].get(), ref.T[1:3, ::-2])
    np.testing.assert_array_equal(a.reshape(11, 9)[2].get(), ref.reshape(11, 9)[2])
    flat = anp.zeros(12).reshape(3, 4)
    flat[1:, 2] = 5.0
    want = np.zeros(12).reshape(3, 4)
    want[1:, 2] = 5.0
    np.testing.assert_array_equal(flat.get(), want)


def test_reductions_every_axis_and_op(rng):
    x = rng.random((5, 4, 3, 2))
    ax = anp.asarray(x)
    for axis in (None, 0, 1, 2, 3, (0, 2), (1, 3), (0, 1, 2), -1):
        for op in ("sum", "max") if axis not in (None, 1, (0, 2)) else ("sum", "prod", "max", "min", "mean"):
            got = getattr(ax * 2 - 1, op)(axis=axis).get()
            np.testing.assert_allclose(got, getattr(x * 2 - 1, op)(axis=axis), rtol=1e-12)
    ints = rng.integers(0, 100, (6, 7)).astype(np.int32)
    s = anp.asarray(ints).sum(axis=0)
    assert s.get().dtype == ints.sum(axis=0).dtype  # int32 sums accumulate in int64, like NumPy
    np.testing.assert_array_equal(s.get(), ints.sum(axis=0))
    np.testing.assert_array_equal(anp.asarray(ints).sum(axis=1, keepdims=True).get(), ints.sum(1, keepdims=True))
    assert bool((anp.asarray(ints) > 50).any()) == bool((ints > 50).any())
    assert float(anp.sum(anp.asarray(x))) == pytest.approx(x.sum())
    empty = anp.zeros((0, 3))  # empty arrays launch nothing and reduce to the identity
    assert (empty + 1).get().shape == (0, 3)
    np.testing.assert_array_equal(empty.sum(axis=0).get(), np.zeros(3))


@pytest.mark.parametrize("variant", ["thread_per_output", "tree", "segmented", "two_pass", "grid_stride", "column"])
def test_each_reduction_variant_matches_numpy(rng, variant):
    sess = lang_session.session()
    sess.chooser = lambda rs, node, rt: (variant, {"block": 32, "seg": 8, "parts": 3, "unroll": 3,
                                                   "groups_per_sm": 1})
    try:
        x = rng.random((33, 70)).astype(np.float32)
        ax = anp.asarray(x)
        for axis in (None, 0, 1):
            np.testing.assert_allclose((ax * ax).sum(axis=axis).get(), (x * x).sum(axis=axis, dtype=np.float64),
                                       rtol=2e-5)
            np.testing.assert_array_equal(ax.max(axis=axis).get(), x.max(axis=axis))
        y = rng.random((3, 5, 4))
        np.testing.assert_allclose(anp.asarray(y).sum(axis=(0, 2)).get(), y.sum(axis=(0, 2)), rtol=1e-12)
        # reductions over one shape and axes share a kernel (and their common subexpressions)
        ay = anp.asarray(y)
        e = anp.exp(ay)
        total, top, count = e.sum(axis=1), (e * ay).max(axis=1), (ay > 0.5).sum(axis=1)
        del e  # a temporary nobody holds is never materialised
        stats = anp.flush()
        assert stats.kernels == (2 if variant in ("two_pass", "grid_stride", "column") else 1)
        np.testing.assert_allclose(total.get(), np.exp(y).sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(top.get(), (np.exp(y) * y).max(axis=1), rtol=1e-12)
        np.testing.assert_array_equal(count.get(), (y > 0.5).sum(axis=1))
    finally:
        sess.chooser = None


@pytest.mark.parametrize("block,parts", [(64, 3), (32, 1), (256, 0)])
def test_column_reduction_over_a_leading_axis_matches_numpy(rng, block, parts):
    # whole rows a step for few outputs over a strided leading axis; shapes it does not fit fall back
    sess = lang_session.session()
    sess.chooser = lambda rs, node, rt: ("column", {"block": block, "parts": parts})
    try:
        tall = rng.random((1001, 16)).astype(np.float32)
        at = anp.asarray(tall)
        total, top = (at * 2).sum(axis=0), at.max(axis=0)
        assert anp.flush().kernels == 2  # both reductions in one pass-1 kernel, then the second pass
        np.testing.assert_allclose(total.get(), (tall * 2).sum(axis=0, dtype=np.float64), rtol=2e-5)
        np.testing.assert_array_equal(top.get(), tall.max(axis=0))
        cube = rng.random((37, 4, 4))
        np.testing.assert_allclose(anp.asarray(cube).sum(axis=0).get(), cube.sum(axis=0), rtol=1e-12)
        np.testing.assert_allclose(anp.asarray(cube).sum(axis=(0, 1)).get(), cube.sum(axis=(0, 1)), rtol=1e-12)
        odd = rng.random((50, 6))  # 6 outputs do not divide the work-group: two_pass instead, same answer
        np.testing.assert_allclose(anp.asarray(odd).sum(axis=0).get(), odd.sum(axis=0), rtol=1e-12)
        np.testing.assert_allclose(anp.asarray(tall).sum(axis=1).get(), tall.sum(axis=1, dtype=np.float64),
                                   rtol=2e-5)  # the reduced axis innermost: not a column shape either
    finally:
        sess.chooser = None


def test_fusion_black_scholes_is_one_kernel_with_two_outputs(rng):
    n = 1000
    s, k, t = rng.uniform(10, 50, n), rng.uniform(10, 50, n), rng.uniform(0.1, 2, n)
    r, v = 0.02, 0.3

    def bs(xp, erf, s, k, t):
        d1 = (xp.log(s / k) + (r + 0.5 * v * v) * t) / (v * xp.sqrt(t))
        d2 = d1 - v * xp.sqrt(t)
        cnd1 = 0.5 * (1 + erf(d1 / np.sqrt(2)))
        cnd2 = 0.5 * (1 + erf(d2 / np.sqrt(2)))
        call = s * cnd1 - k * xp.exp(-r * t) * cnd2
        put = k * xp.exp(-r * t) * (1 - cnd2) - s * (1 - cnd1)
        return call, put

    from scipy.special import erf

    call, put = bs(anp, anp.erf, anp.asarray(s), anp.asarray(k), anp.asarray(t))
    stats = anp.flush()
    assert stats.kernels == 1
    assert stats.bytes == 5 * n * 8  # three inputs read, two outputs written: no temporaries
    want_call, want_put = bs(np, erf, s, k, t)
    np.testing.assert_allclose(call.get(), want_call, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(put.get(), want_put, rtol=1e-10, atol=1e-10)


def test_nbody_style_contraction_never_allocates_the_pair_matrix(rng):
    n = 64
    x = rng.random(n)
    m = rng.random(n)
    ax, am = anp.asarray(x), anp.asarray(m)
    dx = ax[None, :] - ax[:, None]
    f = (am[None, :] * dx / (dx * dx + 0.01) ** 1.5).sum(axis=1)
    del dx
    stats = anp.flush()
    assert stats.bytes < n * n * 8  # the n x n temporary lives in registers only
    dxh = x[None, :] - x[:, None]
    np.testing.assert_allclose(f.get(), (m[None, :] * dxh / (dxh * dxh + 0.01) ** 1.5).sum(axis=1), rtol=1e-10)


def test_plan_cache_hits_in_a_steady_loop(rng):
    a = anp.asarray(rng.random(100))
    compiled = []
    for i in range(4):
        a = a * 0.5 + float(i)  # a changing scalar is an argument, not a recompile
        stats = anp.flush()
        compiled.append(stats.compiled)
    assert compiled[0] >= 0 and compiled[1:] == [0, 0, 0]
    assert anp.last_flush().cache_hit


def test_numpy_ufuncs_dispatch_and_out_is_a_recorded_write(rng):
    x, y = rng.random((3, 4)), rng.random(4)
    a, b = anp.asarray(x), anp.asarray(y)
    np.testing.assert_allclose(np.maximum(a, b).get(), np.maximum(x, y))  # NumPy's own ufuncs dispatch
    c = anp.zeros((3, 4))
    view = c[1:]
    assert np.add(a[1:], b, out=view) is view
    want = np.zeros((3, 4))
    want[1:] = x[1:] + y
    np.testing.assert_allclose(c.get(), want)
    np.testing.assert_allclose(np.add.reduce(a, axis=1).get(), x.sum(axis=1))


def test_numpy_exception_types(rng):
    a = anp.asarray(rng.random((3, 4)))
    with pytest.raises(ValueError, match="broadcast"):
        a + anp.ones(5)
    with pytest.raises(ValueError, match="could not broadcast"):
        a[0] = anp.ones(3)
    with pytest.raises(TypeError, match="complex128"):
        anp.asarray(np.ones(3, complex))
    with pytest.raises(np.exceptions.AxisError):
        a.sum(axis=2)
    with pytest.raises(IndexError, match="out of bounds"):
        a[3]
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape(5, 2)
    with pytest.raises(ValueError, match="zero-size array"):
        anp.zeros((0, 3)).max()


def test_unsupported_ops_fall_back_with_one_warning(rng):
    x = rng.random(10)
    a = anp.asarray(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c1 = anp.cumsum(a)
        c2 = anp.cumsum(a * 2)
    names = [str(w.message) for w in caught if issubclass(w.category, FallbackWarning)]
    assert len(names) == 1 and "cumsum" in names[0]
    np.testing.assert_allclose(c1.get(), np.cumsum(x))
    np.testing.assert_allclose(c2.get(), np.cumsum(x * 2))
    np.testing.assert_allclose((a[np.array([3, 1])] + 1).get(), x[[3, 1]] + 1)
    m = rng.random((5, 3))
    np.testing.assert_allclose(anp.dot(anp.asarray(m).T, anp.asarray(m)).get(), m.T @ m)


def test_compile_failure_names_the_operation_and_interpreter_matches_numpy(rng):
    rt = lang_session.session().runtime
    with pytest.raises(KernelCompileError, match="my_op"):
        rt.compile("KERNEL at_kernel(GLOBAL float* o) { o[0] = undefined_name; }", "at_kernel", "my_op")
    x = rng.random((6, 5))
    a = anp.asarray(x)
    a[1:, ::2] = anp.sqrt(a[:-1, ::2]) * 3
    ref = x.copy()
    ref[1:, ::2] = np.sqrt(ref[:-1, ::2]) * 3
    expr = (a.sum(axis=0) + 1).base.node
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        out, = evaluate_eagerly([expr], rt, "test")
    np.testing.assert_allclose(rt.download(out, (5,), np.dtype(np.float64)), ref.sum(axis=0) + 1)


def test_writes_through_transposed_and_reshaped_views_are_compiled(rng):
    x = rng.random((4, 6))
    a = anp.asarray(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        a.T[::2, 1:3] = -1.0
        a.reshape(6, 4)[1:, ::-1][2] = anp.arange(4.0)
    ref = x.copy()
    ref.T[::2, 1:3] = -1.0
    ref.reshape(6, 4)[1:, ::-1][2] = np.arange(4.0)
    np.testing.assert_array_equal(a.get(), ref)


def test_random_views_writes_and_sums_match_numpy():
    """Seeded random basic indexing (negative steps, integers), writes through the view, reductions of it."""
    import random

    picker = random.Random(5)
    rng = np.random.default_rng(5)

    def some_slice(n):
        start, stop = picker.choice([None, picker.randint(-n, n)]), picker.choice([None, picker.randint(-n, n)])
        return slice(start, stop, picker.choice([1, 2, -1, -2, 3]))

    checked = 0
    while checked < 8:
        shape = tuple(picker.randint(1, 6) for _ in range(picker.randint(1, 3)))
        key = tuple(some_slice(n) if picker.random() < 0.8 else picker.randint(-n, n - 1) for n in shape)
        x = rng.random(shape)
        want = x[key]
        if want.size == 0 or want.ndim == 0:
            continue
        a = anp.asarray(x)
        view = a[key]
        np.testing.assert_array_equal(view.get(), want)
        value = rng.random(want.shape)
        a[key] = anp.asarray(value)
        x[key] = value
        np.testing.assert_array_equal(a.get(), x)
        axis = picker.choice([None, *range(want.ndim)])
        np.testing.assert_allclose(view.sum(axis=axis).get(), x[key].sum(axis=axis), rtol=1e-12)  # view aliases a
        checked += 1
