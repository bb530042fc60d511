"""SpMV kernels (the same dialect source the GPU runs) on PoCL against SciPy, plus the feature kernel."""

import numpy as np
import pytest
import scipy.sparse as sp

from adaptune.kernels import features, inputs, spmv
from adaptune.kernels.device import OpenCLDevice


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def _run(dev, m, name, x):
    y = dev.zeros(m.n_rows, np.float32)
    spmv.variants(with_libraries=False)[name](m, dev.asarray(x), y)
    return dev.to_host(y)


@pytest.mark.parametrize("family", inputs.MATRIX_FAMILIES)
def test_every_variant_matches_scipy(dev, family):
    indptr, indices, data, shape = inputs.sparse_matrix(family, 600, 6.0, seed=3)
    a = sp.csr_matrix((data, indices, indptr), shape=shape)
    x = np.random.default_rng(1).standard_normal(shape[1]).astype(np.float32)
    expected = a.astype(np.float64) @ x.astype(np.float64)
    m = spmv.upload(dev, indptr, indices, data, shape, ell_max_fill=1e9, dia_max_fill=1e9,
                    memory_budget_bytes=2**30)
    assert m.ell is not None and m.dia is not None
    tol = 1e-4 * (np.abs(a).astype(np.float64) @ np.abs(x)) + 1e-5
    for name in spmv.variants(with_libraries=False):
        got = _run(dev, m, name, x)
        assert np.all(np.abs(got - expected) <= tol), f"{family}/{name}"


def test_portable_reduction_path_and_empty_rows(dev):
    indptr = np.array([0, 0, 3, 3, 40, 41], dtype=np.int32)
    indices = np.concatenate([[0, 2, 4], np.arange(37) % 5, [1]]).astype(np.int32)
    data = np.arange(1, 42, dtype=np.float32) / 10
    a = sp.csr_matrix((data, indices, indptr), shape=(5, 5))
    x = np.arange(5, dtype=np.float32) + 1
    m = spmv.upload(dev, indptr, indices, data, (5, 5))
    for vec in spmv.VECTOR_WIDTHS:
        y = dev.zeros(5, np.float32)
        spmv.csr_vector(m, dev.asarray(x), y, vec, portable_reduce=True)
        np.testing.assert_allclose(dev.to_host(y), a @ x, rtol=1e-5)


@pytest.mark.parametrize("family", ["power_law_heavy", "arrow", "rmat"])
def test_balanced_csr_on_rows_spanning_many_chunks(dev, family):
    # long rows cross several chunks of BLOCK * CHUNK_ITEMS non-zeros: the carry fix-up must add them up
    indptr, indices, data, shape = inputs.sparse_matrix(family, 20_000, 6.0, seed=2)
    assert np.diff(indptr).max() > 2 * spmv.CHUNK or family == "rmat"
    a = sp.csr_matrix((data, indices, indptr), shape=shape)
    x = np.random.default_rng(3).standard_normal(shape[1]).astype(np.float32)
    m = spmv.upload(dev, indptr, indices, data, shape)
    tol = 1e-4 * (np.abs(a).astype(np.float64) @ np.abs(x)) + 1e-5
    got = _run(dev, m, "csr_balanced", x)
    assert np.all(np.abs(got - a.astype(np.float64) @ x.astype(np.float64)) <= tol)


def test_balanced_csr_empty_rows_and_empty_matrix(dev):
    # empty rows at the start, at chunk boundaries and at the end; then a matrix with no entries at all
    lengths = np.zeros(5000, np.int64)
    lengths[7:4000:3] = 7
    lengths[100] = 3 * spmv.CHUNK + 5
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    nnz = int(indptr[-1])
    rng = np.random.default_rng(0)
    indices = np.concatenate([np.sort(rng.choice(8000, int(k), replace=False)) for k in lengths]).astype(np.int32)
    data = rng.standard_normal(nnz).astype(np.float32)
    a = sp.csr_matrix((data, indices, indptr), shape=(5000, 8000))
    x = rng.standard_normal(8000).astype(np.float32)
    m = spmv.upload(dev, indptr, indices, data, (5000, 8000))
    np.testing.assert_allclose(_run(dev, m, "csr_balanced", x), a @ x, rtol=1e-4, atol=1e-3)
    empty = spmv.upload(dev, np.zeros(4, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32), (3, 3))
    y = dev.asarray(np.ones(3, np.float32))
    spmv.csr_balanced(empty, dev.asarray(np.ones(3, np.float32)), y)
    np.testing.assert_array_equal(dev.to_host(y), 0)


def test_constraints_refuse_formats_with_large_fill(dev):
    indptr, indices, data, shape = inputs.sparse_matrix("arrow", 2000, 4.0, seed=5)
    m = spmv.upload(dev, indptr, indices, data, shape)
    assert m.ell is None and m.dia is None
    assert not spmv.available(m, "ell") and not spmv.available(m, "dia")
    with pytest.raises(spmv.FormatConstraintError, match="ELL"):
        spmv.ell(m, dev.zeros(shape[1], np.float32), dev.zeros(shape[0], np.float32))


def test_dia_estimate_reads_at_most_the_cap_of_a_dense_row(dev):
    indptr, indices, data, shape = inputs.sparse_matrix("arrow", 3000, 9.0, seed=3)
    assert np.diff(indptr).max() > features.DIA_ROW_CAP  # dense rows beyond the cap
    m = spmv.upload(dev, indptr, indices, data, shape)
    got = features.spmv_features(m, sample_rows=shape[0], cached=False)["dia_fill"]
    capped = features.spmv_features_reference(indptr, indices, shape)["dia_fill"]
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    exact = np.unique(indices.astype(np.int64) - rows).size * shape[0] / indptr[-1]
    assert got == pytest.approx(capped, rel=1e-6) and capped < exact and capped > spmv.DIA_MAX_FILL


def test_bad_shape_is_refused(dev):
    with pytest.raises(ValueError, match="indptr has"):
        spmv.upload(dev, np.array([0, 1], np.int32), np.array([0], np.int32), np.ones(1, np.float32), (3, 3))


@pytest.mark.parametrize("family", ["banded", "power_law", "stencil_3d", "near_diagonal", "arrow"])
def test_features_match_exact_reference(dev, family):
    indptr, indices, data, shape = inputs.sparse_matrix(family, 1500, 9.0, seed=11)
    m = spmv.upload(dev, indptr, indices, data, shape)
    want = features.spmv_features_reference(indptr, indices, shape)
    for _ in range(2):  # the second call reuses the stamp buffer with a new generation
        got = features.spmv_features(m, sample_rows=shape[0], cached=False)
        for key in features.SPMV_FEATURES:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-4), key
    # kept with the matrix: a later call returns the same values without a launch
    assert features.spmv_features(m, sample_rows=shape[0]) == got
    features.forget_spmv_features(m)
    assert ("features", shape[0]) not in m.extra and "ell_width" in m.extra


def test_sampled_dia_fill_is_a_lower_bound(dev):
    indptr, indices, data, shape = inputs.sparse_matrix("uniform_random", 4000, 8.0, seed=2)
    m = spmv.upload(dev, indptr, indices, data, shape)
    exact = features.spmv_features_reference(indptr, indices, shape)["dia_fill"]
    sampled = features.spmv_features(m, sample_rows=200)["dia_fill"]
    assert 0 < sampled <= exact
    assert sampled > spmv.DIA_MAX_FILL  # still enough to refuse DIA for a random matrix
