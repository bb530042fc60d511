"""Large element-wise kernels take several elements per work-item: same values as NumPy at every size
around the switch and the group boundaries, with and without work-group tuning (real PoCL kernels)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import fuse  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.runtime import Runtime  # noqa: E402
from adaptune.lang.tune import WorkGroupTuner  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_session():
    lang_session.use_runtime(Runtime("opencl"))
    yield
    lang_session.use_runtime(None)


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
    got = anp.asarray(x) * 3.0 + 1.0
    anp.flush()
    step = sess.last_plan.steps[-1]
    assert step.per_item > 1 and step.grid * step.block * step.per_item >= n > (step.grid - 1) * step.block * step.per_item
    np.testing.assert_array_equal(got.get(), x * 3.0 + 1.0)
