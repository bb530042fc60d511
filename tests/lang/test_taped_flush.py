"""A cache hit found from the recording tape (no walk of the trace) binds the right buffers and scalars: the
same recorded structure with other aliasing, shapes, dtypes, scalar values, views or ownership never replays
a wrong plan (real PoCL kernels, results checked against NumPy)."""

from __future__ import annotations

import os

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.graphs import GIVE_UP_AFTER  # noqa: E402

pytestmark = pytest.mark.usefixtures("lang_runtime")


def _taped() -> bool:
    """The last flush was bound from the tape (a hit without walking the trace)."""
    sess = lang_session.session()
    return sess.last.cache_hit and sess.last_order is None


def test_a_steady_loop_hits_from_the_tape_and_stays_exact():
    x = np.arange(1000, dtype=np.float32)
    a, want = anp.asarray(x), x.copy()
    for i in range(6):
        a[...] = a * np.float32(0.5) + np.float32(i)  # a new scalar value every step: bound, not baked in
        anp.flush()
        want = want * np.float32(0.5) + np.float32(i)
    assert _taped()
    np.testing.assert_array_equal(a.get(), want)


def test_aliasing_is_part_of_the_key():
    rng = np.random.default_rng(0)
    x, y = rng.random(64), rng.random(64)
    a, b = anp.asarray(x), anp.asarray(y)
    for _ in range(4):
        r = a * 2.0 + b
        anp.flush()
        np.testing.assert_allclose(r.get(), x * 2 + y)
    assert _taped()
    r = a * 2.0 + a  # same operations and descriptions, one buffer read twice
    anp.flush()
    np.testing.assert_allclose(r.get(), x * 3)
    r = b * 2.0 + b
    anp.flush()
    np.testing.assert_allclose(r.get(), y * 3)


def test_shapes_dtypes_and_views_change_the_key():
    x = np.arange(24, dtype=np.float64)
    a = anp.asarray(x)
    for _ in range(3):
        r = a[1:] - a[:-1]
        anp.flush()
        np.testing.assert_array_equal(r.get(), x[1:] - x[:-1])
    r = a[2:] - a[:-2]  # same operations, other offsets
    anp.flush()
    np.testing.assert_array_equal(r.get(), x[2:] - x[:-2])
    c = anp.asarray(x.astype(np.float32))
    r = c[1:] - c[:-1]
    anp.flush()
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r.get(), np.diff(x.astype(np.float32)))
    m = anp.asarray(x.reshape(4, 6))
    r = m[1:] - m[:-1]
    anp.flush()
    np.testing.assert_array_equal(r.get(), np.diff(x.reshape(4, 6), axis=0))


def test_a_copy_taken_between_updates_keeps_its_values():
    x = np.ones(32, np.float32)
    a = anp.asarray(x)
    for _ in range(4):  # a miss, a walked hit (the miss built nodes on the next tape), then hits from the tape
        a[...] = a + np.float32(1)
        anp.flush()
    assert _taped()
    keep = a.copy()  # a's buffer is shared from now on: the next update may not write it in place
    a[...] = a + np.float32(1)
    anp.flush()
    np.testing.assert_array_equal(keep.get(), np.full(32, 5, np.float32))
    np.testing.assert_array_equal(a.get(), np.full(32, 6, np.float32))


def test_which_arrays_are_alive_changes_the_roots():
    x = np.arange(16, dtype=np.float64)
    a = anp.asarray(x)
    for keep_both in (True, True, False, True, False, False):
        u = a + 1.0
        v = u * 3.0
        if not keep_both:
            del u
        anp.flush()
        np.testing.assert_array_equal(v.get(), (x + 1) * 3)
        if keep_both:
            np.testing.assert_array_equal(u.get(), x + 1)


def test_an_update_read_before_its_base_changes_in_the_same_flush():
    x = np.arange(8, dtype=np.float64)
    for _ in range(3):
        a = anp.asarray(x)
        old = a * 1.0  # reads the old version: the update may not overwrite it before this kernel ran
        a[...] = a + 10.0
        anp.flush()
        np.testing.assert_array_equal(old.get(), x)
        np.testing.assert_array_equal(a.get(), x + 10)


def test_operand_order_is_part_of_the_key():
    rng = np.random.default_rng(1)
    x, y = rng.random(32), rng.random(32)
    a, b = anp.asarray(x), anp.asarray(y)
    for _ in range(4):
        p, r = a * b, a - b
        anp.flush()
    assert _taped()
    p, r = a * b, b - a  # the same leaves read in the same order first; only the edges differ
    anp.flush()
    np.testing.assert_allclose(p.get(), x * y)
    np.testing.assert_allclose(r.get(), y - x)


def test_a_buffer_shared_after_it_was_read_is_not_overwritten():
    a = anp.asarray(np.zeros(16, np.float32))
    for _ in range(4):
        t = a + np.float32(1)
        a[...] = t  # written in place: a owns its buffer
        anp.flush()
    assert _taped()
    t = a + np.float32(1)  # the buffer is on the tape as owned ...
    keep = a.copy()  # ... and shared from here: the update must go to a new buffer
    a[...] = t
    anp.flush()
    np.testing.assert_array_equal(keep.get(), np.full(16, 4, np.float32))
    np.testing.assert_array_equal(a.get(), np.full(16, 5, np.float32))


def _same_with_and_without_graphs(steps) -> None:
    """Run ``steps(hosts)`` (it returns the arrays it ends with) with CUDA graphs on, then off: bit-identical."""
    rng = np.random.default_rng(3)
    hosts = [rng.random(4096).astype(np.float32) for _ in range(2)]
    sess = lang_session.session()
    results = []
    for graphs in (True, False):
        sess.cuda_graphs = graphs
        results.append([a.get() for a in steps(hosts)])
    sess.cuda_graphs = True
    for got, want in zip(results[0], results[1], strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs: run with ADAPTUNE_LANG_TEST_DEVICE=cuda on a GPU")
def test_cuda_graph_of_a_cache_hit_follows_its_scalars_and_buffers():
    def steps(hosts):
        arrays = [anp.asarray(h) for h in hosts]
        for i, s in enumerate([0.5] * 4 + [-0.25] * 3 + [2.0] * 3 + [0.5] * 3):
            j = (i // 4) % 2  # four steps on one array, then the other: other addresses, same plan
            arrays[j][...] = arrays[j] * np.float32(s) + np.float32(i)
            anp.flush()
        return arrays

    _same_with_and_without_graphs(steps)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs: run with ADAPTUNE_LANG_TEST_DEVICE=cuda on a GPU")
def test_cuda_graph_of_a_step_that_makes_new_arrays_replays_and_stays_exact():
    """The n-body step's form: every step returns new arrays (outputs allocated per launch); the memory pool
    hands the blocks of the step before back, so the graphs keyed by those addresses replay."""
    sess = lang_session.session()

    def steps(hosts):
        x, v = (anp.asarray(h) for h in hosts)
        for _ in range(12):
            x, v = x + np.float32(0.5) * v, v * np.float32(0.9) - np.float32(0.25) * x
            anp.flush()
        assert _taped()  # (the first steps may walk: the uploaded arrays are leaves of another kind)
        if sess.cuda_graphs:
            assert any(hit.graph is not None and hit.graph.graphs for hit in sess.taped.values()), \
                "no graph was captured for the allocating step"
        return x, v

    _same_with_and_without_graphs(steps)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs: run with ADAPTUNE_LANG_TEST_DEVICE=cuda on a GPU")
def test_a_plan_whose_arguments_never_repeat_stops_keying_graphs_and_stays_exact():
    """A scalar that changes every step: no graph key comes twice, so after ``GIVE_UP_AFTER`` launches the plan
    launches kernel by kernel without computing keys."""
    sess = lang_session.session()

    def steps(hosts):
        x = anp.asarray(hosts[0])
        for i in range(GIVE_UP_AFTER + 8):
            x = x * np.float32(0.5) + np.float32(i)
            anp.flush()
        if sess.cuda_graphs:
            replays = [hit.graph for hit in sess.taped.values() if hit.plan is sess.last_plan]
            assert any(r is not None and not r.usable for r in replays)
        return [x]

    _same_with_and_without_graphs(steps)
