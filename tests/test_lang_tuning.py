"""Reduction variants chosen by a trained CodeVariant, and work-group tuning stored in a real SQLite Store."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import reduce as lang_reduce  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.runtime import Runtime  # noqa: E402
from adaptune.lang.tune import WorkGroupTuner  # noqa: E402
from adaptune.store import Store  # noqa: E402

LADDER = ((1, 1 << 13, True), (512, 16, True), (32, 512, False))


@pytest.fixture(autouse=True)
def fresh_session():
    lang_session.use_runtime(Runtime("opencl"))
    yield
    lang_session.use_runtime(None)


def test_reduction_model_is_trained_stored_reused_and_used(tmp_path):
    db = tmp_path / "lang.db"
    small = dict(blocks=(32, 128), segments=(4,), unrolls=(4,), groups_per_sm=(4,), grid_budget=1)
    cv = lang_reduce.tune_reductions(db, ladder=LADDER, repeats=2, **small)
    report = cv.last_training
    assert report.measured > 0 and report.reused == 0 and not report.failures
    assert set(lang_reduce.REDUCE_VARIANTS) <= {lab.split("[")[0] for lab in report.labels} | {"rule"}
    # a second process-equivalent run finds every label in the store and measures nothing
    again = lang_reduce.tune_reductions(db, ladder=LADDER, repeats=2, **small)
    assert again.last_training.measured == 0 and again.last_training.reused == report.measured
    # the installed selector picks a label per shape; results stay correct whatever it picks
    chooser = lang_session.session().chooser
    assert isinstance(chooser, lang_reduce.Selector)
    x = np.random.default_rng(3).random((512, 16)).astype(np.float32)
    np.testing.assert_allclose(anp.asarray(x).sum(axis=1).get(), x.sum(axis=1), rtol=1e-5)
    assert chooser.cache  # the model was consulted for this shape
    path = tmp_path / "reduce_model.json"
    cv.save(path)
    loaded = lang_reduce.load_model(str(path), blocks=(32, 128), segments=(4,), unrolls=(4,), groups_per_sm=(4,))
    assert loaded.model_labels == cv.model_labels


def test_untuned_rule_per_device_kind():
    """The rule is a pure table over (shape, device kind); on CUDA it picks the kernels measured best on the
    H100 for the benchmark's ladder, on OpenCL CPUs the chunked ones."""
    from types import SimpleNamespace

    from adaptune.lang.codegen import ReduceShape
    from adaptune.lang.rules import default_choice

    gpu = SimpleNamespace(kind="cuda", max_block=1024, multiprocessors=132)
    cpu = SimpleNamespace(kind="opencl", max_block=4096, multiprocessors=2)

    def rs(n_out, length, stride):  # the reduced axis leading when strided, last when contiguous
        if stride == 1:
            return ReduceShape(n_out, length, stride, (0,), (1,), (n_out, length))
        return ReduceShape(n_out, length, stride, (1,), (0,), (length, n_out))

    cases = [  # (outputs, length, stride): CUDA pick, OpenCL pick
        ((1, 1 << 26, 1), "grid_stride", "two_pass"),
        ((8192, 8192, 8192), "segmented", "thread_per_output"),  # 2-D axis 0
        ((8192, 8192, 1), "tree", "tree"),  # 2-D axis 1
        ((1 << 18, 256, 1 << 18), "thread_per_output", "thread_per_output"),  # 3-D axis 0
        ((1 << 17, 512, 1), "segmented", "tree"),  # 3-D last axis
        ((1 << 22, 16, 1), "segmented", "thread_per_output"),  # rows of 16
        ((16, 1 << 22, 1), "grid_stride", "tree"),  # long rows (a 2-core CPU: 16 rows fill it)
        ((16, 1 << 22, 16), "column", "column"),  # tall axis 0: whole rows of 16 a step
    ]
    for shape, on_gpu, on_cpu in cases:
        assert default_choice(rs(*shape), gpu)[0] == on_gpu, shape
        assert default_choice(rs(*shape), cpu)[0] == on_cpu, shape


def test_reduction_ladder_covers_the_feature_space():
    full = lang_reduce.LADDER_FULL
    assert len(full) >= 30 and len(set(full)) == len(full)
    assert {c for _, _, c in full} == {True, False} and {n for n, _, _ in full} >= {1, 4, 1 << 20}
    assert all(n * length in (1 << 20, 1 << 24) for n, length, _ in full)


def test_elementwise_work_group_tuning_is_stored_and_reused(tmp_path):
    db = tmp_path / "wg.db"
    sess = lang_session.session()
    sess.tuner = WorkGroupTuner(db, candidates=(64, 256), repeats=2, launches=1)
    x = np.random.default_rng(4).random((300, 200))
    y = anp.asarray(x) * 3 - 1
    anp.flush()
    report = sess.tuner.report
    assert sess.tuner.measured == 2 and report[0]["best_block"] in (64, 256)
    np.testing.assert_allclose(y.get(), x * 3 - 1)
    assert len(Store(db).results()) == 2
    # next session: same kernel, found in the store, nothing measured
    lang_session.use_runtime(Runtime("opencl"))
    lang_session.session().tuner = tuner = WorkGroupTuner(db, candidates=(64, 256), repeats=2, launches=1)
    z = anp.asarray(x) * 3 - 1
    anp.flush()
    assert tuner.measured == 0 and tuner.reused == 1
    np.testing.assert_allclose(z.get(), x * 3 - 1)
