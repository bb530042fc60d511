"""KeptDispatch: the choice is computed once per object (features + model) and then reused; a real
CodeVariant over real SpMV kernels on PoCL."""

import numpy as np
import pytest

from adaptune.adaptive import CodeVariant, Label
from adaptune.adaptive.models import fit_model
from adaptune.kernels import features, inputs, spmv
from adaptune.kernels.device import OpenCLDevice
from adaptune.kernels.dispatch import KeptDispatch


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def _cv():
    calls = []
    cv = CodeVariant("spmv_test", verify=False)
    cv.variant(spmv.csr_scalar, name="csr_scalar", default=True)
    cv.variant(lambda m, x, y: spmv.csr_vector(m, x, y, 32), name="csr_vector_32")

    @cv.feature(name="avg")
    def avg(m, x, y):
        calls.append(1)
        return features.spmv_features(m, cached=False)["avg_nnz_per_row"]

    # a model that sends short rows to csr_scalar and long rows to csr_vector_32
    xs = np.array([[2.0], [3.0], [4.0], [60.0], [80.0], [100.0]])
    costs = np.array([[1, 2], [1, 2], [1, 2], [2, 1], [2, 1], [2, 1]], float)
    fitted = fit_model("tree", xs, costs)
    cv.install_model(fitted.params, [Label.of("csr_scalar"), Label.of("csr_vector_32")], fitted.kind)
    return cv, calls


def test_choice_is_kept_with_the_matrix_and_runs_the_right_kernel(dev):
    cv, calls = _cv()
    kept = KeptDispatch(cv)
    for avg, want in ((3.0, "csr_scalar"), (90.0, "csr_vector_32")):
        indptr, indices, data, shape = inputs.sparse_matrix("constant_row", 400, avg, seed=1)
        m = spmv.upload(dev, indptr, indices, data, shape)
        x = np.random.default_rng(0).standard_normal(shape[1]).astype(np.float32)
        y = dev.zeros(shape[0], np.float32)
        args = (m, dev.asarray(x), y)
        calls.clear()
        assert kept.select(*args).variant == want and len(calls) == 1
        assert kept.select(*args).variant == want and len(calls) == 1  # kept: no feature evaluation
        kept(*args)
        assert len(calls) == 1
        a = np.zeros(shape, np.float64)
        np.add.at(a, (np.repeat(np.arange(shape[0]), np.diff(indptr)), indices), data)
        np.testing.assert_allclose(dev.to_host(y), a @ x, rtol=1e-4, atol=1e-4)
        kept.forget(*args)
        kept.select(*args)
        assert len(calls) == 2  # forgotten: computed again


def test_a_new_model_invalidates_kept_choices(dev):
    cv, calls = _cv()
    kept = KeptDispatch(cv)
    indptr, indices, data, shape = inputs.sparse_matrix("constant_row", 300, 4.0, seed=2)
    m = spmv.upload(dev, indptr, indices, data, shape)
    args = (m, dev.zeros(shape[1], np.float32), dev.zeros(shape[0], np.float32))
    kept.select(*args)
    cv.install_model(cv.model_params, cv.model_labels, cv.model_kind)  # same params object: still kept
    kept.select(*args)
    assert len(calls) == 1
    fitted = fit_model("tree", np.array([[1.0], [2.0]]), np.array([[2.0, 1.0], [2.0, 1.0]]))
    cv.install_model(fitted.params, cv.model_labels, fitted.kind)
    assert kept.select(*args).variant == "csr_vector_32" and len(calls) == 2


def test_objects_without_extra_are_refused():
    cv, _ = _cv()
    with pytest.raises(TypeError, match="extra"):
        KeptDispatch(cv).select(np.zeros(3), 1, 2)


def test_bind_returns_the_chosen_launcher_kept_with_the_matrix(dev):
    cv, calls = _cv()
    kept = KeptDispatch(cv)
    indptr, indices, data, shape = inputs.sparse_matrix("constant_row", 300, 90.0, seed=3)
    m = spmv.upload(dev, indptr, indices, data, shape)
    x = np.random.default_rng(1).standard_normal(shape[1]).astype(np.float32)
    args = (m, dev.asarray(x), dev.zeros(shape[0], np.float32))
    launcher = kept.bind(*args)
    assert launcher is cv.variant_function("csr_vector_32") and len(calls) == 1
    assert kept.bind(*args) is launcher and len(calls) == 1  # kept: no feature, model or label work
    launcher(*args)
    a = np.zeros(shape, np.float64)
    np.add.at(a, (np.repeat(np.arange(shape[0]), np.diff(indptr)), indices), data)
    np.testing.assert_allclose(dev.to_host(args[2]), a @ x, rtol=1e-4, atol=1e-4)
    fitted = fit_model("tree", np.array([[1.0], [2.0]]), np.array([[1.0, 2.0], [1.0, 2.0]]))
    cv.install_model(fitted.params, cv.model_labels, fitted.kind)  # a new model: bound launchers are stale
    assert kept.bind(*args) is cv.variant_function("csr_scalar") and len(calls) == 2
    kept.forget(*args)
    kept.bind(*args)
    assert len(calls) == 3
    with pytest.raises(TypeError, match="extra"):
        kept.bind(np.zeros(3), 1, 2)
