"""Input generators: families are distinct structures, sets are disjoint and sized as the issue asks."""

import numpy as np
import pytest
import scipy.sparse as sp

from adaptune.kernels import features, inputs


@pytest.mark.parametrize("family", inputs.MATRIX_FAMILIES)
def test_matrices_are_canonical_csr(family):
    indptr, indices, data, shape = inputs.sparse_matrix(family, 3000, 12.0, seed=1)
    a = sp.csr_matrix((data, indices, indptr), shape=shape)
    assert a.has_canonical_format and a.nnz > 0
    assert indices.dtype == np.int32 and data.dtype == np.float32
    again = inputs.sparse_matrix(family, 3000, 12.0, seed=1)
    np.testing.assert_array_equal(again[1], indices)


def test_families_differ_in_structure():
    feats = {f: features.spmv_features_reference(*(lambda m: (m[0], m[1], m[3]))(inputs.sparse_matrix(f, 4000, 8.0, 2)))
             for f in inputs.MATRIX_FAMILIES}
    assert feats["banded"]["dia_fill"] <= 1.01 < feats["uniform_random"]["dia_fill"]
    assert feats["constant_row"]["ell_fill"] == pytest.approx(1.0, rel=0.01)  # duplicates dropped
    assert feats["arrow"]["max_deviation"] > 100 * feats["arrow"]["avg_nnz_per_row"] / 10
    assert feats["power_law"]["row_length_sd"] > feats["uniform_random"]["row_length_sd"]


def test_sets_are_disjoint_and_sized():
    for make, n_train, n_test in ((inputs.spmv_specs, 54, 100), (inputs.histogram_specs, 60, 100),
                                  (inputs.sort_specs, 60, 120)):
        train, test = inputs.train_test(make, n_train, n_test, seed=5)
        assert len(train) == n_train and len(test) == n_test
        assert not set(train) & set(test)
    families = {s.family for s in inputs.spmv_specs(54, 0)}
    assert len(families) >= 8


def test_new_sets_cover_bins_key_widths_and_graph_families():
    hist = inputs.histogram_specs(60, 0)
    assert {s.params["bins"] for s in hist} == set(inputs.HISTOGRAM_BINS)
    assert {s.params["key_bits"] for s in hist} == {8, 16, 32}
    assert all(s.params["bins"] <= 2 ** s.params["key_bits"] for s in hist)
    graphs = inputs.bfs_specs(48, 0)
    assert {s.family for s in graphs} == set(inputs.GRAPH_FAMILIES) and len(inputs.GRAPH_FAMILIES) >= 12
    assert all(s.size <= 2**18 for s in graphs if s.family in inputs.HIGH_DIAMETER)
    train, test = inputs.train_test(inputs.bfs_specs, 48, 72, seed=5)
    assert not set(train) & set(test)
    assert {"power_law_heavy", "rmat"} <= {s.family for s in inputs.spmv_specs(54, 0)}


def test_histogram_kinds_cover_skew():
    sds = {k: inputs.histogram_data(k, 20_000, seed=3).std() for k in inputs.HISTOGRAM_KINDS}
    assert sds["constant"] == 0 and sds["uniform"] > 60


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown matrix family"):
        inputs.sparse_matrix("fractal", 100, 3, 0)
    with pytest.raises(ValueError, match="unknown key dtype"):
        inputs.sort_keys("uniform", 10, "int8", 0)
