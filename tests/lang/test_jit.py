"""``anp.jit``: a replayed plan computes what recording the function again computes (real PoCL kernels)."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import eager  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def nbody(x, y, vx, vy, m, dt):
    dx = x[None, :] - x[:, None]
    dy = y[None, :] - y[:, None]
    r2 = dx * dx + dy * dy + 1e-2
    w = m[None, :] / (r2 * anp.sqrt(r2))
    vx = vx + dt * (dx * w).sum(axis=1)
    vy = vy + dt * (dy * w).sum(axis=1)
    return x + dt * vx, y + dt * vy, vx, vy


def test_replay_matches_recording_and_traces_once():
    rng = np.random.default_rng(1)
    host = [rng.random(64).astype(np.float32) for _ in range(5)]
    step = anp.jit(nbody)
    fast = tuple(anp.asarray(h) for h in host[:4])
    slow = tuple(anp.asarray(h) for h in host[:4])
    m = anp.asarray(host[4])
    for _ in range(4):
        fast = step(*fast, m, 1e-3)
        slow = nbody(*slow, m, 1e-3)
    assert len(step.traces) == 1 and anp.last_flush().cache_hit
    for f, s in zip(fast, slow, strict=True):  # an ulp apart on CUDA (H100: 1 of 64 elements), equal on PoCL
        np.testing.assert_allclose(f.get(), s.get(), rtol=1e-6, atol=0)
    step(*fast, m, 2e-3)  # a Python scalar is part of the signature: a new value traces again
    step(*(anp.asarray(h[:32]) for h in host[:4]), anp.asarray(host[4][:32]), 1e-3)  # so does a new shape
    assert len(step.traces) == 3


def test_in_place_update_of_an_argument_and_copies_taken_between_calls():
    h = np.arange(48, dtype=np.float32).reshape(6, 8)

    @anp.jit
    def relax(a):
        a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])

    def relax_np(a):
        a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])

    a, ref = anp.asarray(h), h.copy()
    relax(a)
    relax_np(ref)
    relax(a)
    relax_np(ref)
    kept = a.copy()  # shares a's buffer: the next call may not write it in place
    relax(a)
    relax_np(ref)
    np.testing.assert_allclose(a.get(), ref, rtol=1e-6)
    np.testing.assert_allclose(kept.get(), _twice(h, relax_np), rtol=1e-6)
    assert len(relax.traces) == 2  # a shared buffer is another signature (no in-place write)


def _twice(h, fn):
    r = h.copy()
    fn(r)
    fn(r)
    return r


def test_in_place_add_written_into_the_argument():
    @anp.jit
    def bump(a, b):
        a += b * 2

    a, b = anp.asarray(np.zeros(10, np.int32)), anp.asarray(np.arange(10, dtype=np.int32))
    for _ in range(3):
        bump(a, b)
    np.testing.assert_array_equal(a.get(), 6 * np.arange(10))
    assert anp.last_flush().inplace == 1


def test_aliased_arguments_and_returned_views():
    @anp.jit
    def f(a, b):
        return (a + b)[::2], a

    x = anp.asarray(np.arange(8, dtype=np.float64))
    for _ in range(2):
        s, same = f(x, x)  # the same array twice: its own signature
    assert same is not x and same.base is x.base
    np.testing.assert_array_equal(s.get(), (2 * np.arange(8.0))[::2])
    t, _ = f(x, anp.asarray(np.ones(8)))
    np.testing.assert_array_equal(t.get(), (np.arange(8.0) + 1)[::2])
    assert len(f.traces) == 2


@pytest.mark.filterwarnings("ignore::adaptune.lang.eager.FallbackWarning")
def test_functions_that_need_values_or_keep_arrays_run_plainly(monkeypatch):
    monkeypatch.setattr(eager, "_warned", set())  # runs cumsum eagerly: other tests' warn-once stays theirs
    kept = []

    @anp.jit
    def reads(a):
        return a * float(a.sum())  # a value while tracing: nothing to replay

    @anp.jit
    def reads_stored(a):
        return a * a.get()[0] + anp.cumsum(a)  # values of an argument already in memory (no flush)

    @anp.jit
    def keeps(a):
        kept.append(a * 3)  # an array a replay could not hand back
        return a + 1

    x = anp.asarray(np.arange(4, dtype=np.float64))
    for _ in range(2):
        np.testing.assert_array_equal(reads(x).get(), np.arange(4.0) * 6)
        np.testing.assert_array_equal(keeps(x).get(), np.arange(4.0) + 1)
    assert not reads.traces and not keeps.traces
    for start in (0.0, 5.0):
        y = anp.asarray(np.arange(start, start + 4))
        np.testing.assert_array_equal(reads_stored(y).get(), y.get() * start + np.cumsum(y.get()))
    assert not reads_stored.traces
    np.testing.assert_array_equal(kept[-1].get(), np.arange(4.0) * 3)


def test_dropped_plans_are_traced_again():
    step = anp.jit(lambda a: a * 2 + 1)
    x = anp.asarray(np.ones(5))
    step(x)
    lang_session.session().coalesce = lang_session.session().coalesce  # drops cached plans
    np.testing.assert_array_equal(step(x).get(), np.full(5, 3.0))
    assert not anp.last_flush().cache_hit  # traced and planned again, not replayed with the dropped plan


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs: run with ADAPTUNE_LANG_TEST_DEVICE=cuda on a GPU")
def test_cuda_graph_replay_equals_kernel_by_kernel():
    h = np.random.default_rng(4).random((256, 256)).astype(np.float32)

    def relax(a):  # written in place (same-index reads only) and reduced: nothing allocated per call
        a[...] = a * 0.5 + (a * a).sum(axis=1, keepdims=True) * 1e-3

    sess = lang_session.session()
    results = []
    for graphs in (True, False):
        sess.cuda_graphs = graphs
        step, a = anp.jit(relax), anp.asarray(h)
        for _ in range(6):
            step(a)
        results.append(a.get())
        trace = next(iter(step.traces.values()))
        assert (trace.graph is not None and bool(trace.graph.graphs)) == graphs  # captured on the second replay with the same buffers
    sess.cuda_graphs = True
    np.testing.assert_array_equal(results[0], results[1])
