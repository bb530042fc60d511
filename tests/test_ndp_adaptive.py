"""Generated variants in the adaptive layer on PoCL: schedules as CodeVariant variants with policy Spaces,
features inferred from the first nested sequence, training, dispatch and explain()."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from adaptune.kernels import inputs
from adaptune.kernels.device import OpenCLDevice
from adaptune.lang import ndp


@ndp.computation(values="f32", columns="i32", offsets="i32", x="f32")
def spmv(values, columns, offsets, x):
    rows, cols = ndp.nest(values, offsets), ndp.nest(columns, offsets)
    return ndp.map(lambda r, c: ndp.reduce(ndp.add, ndp.map(ndp.mul, r, ndp.gather(x, c))), rows, cols)


@ndp.computation(x="f32")
def tile_sums(x):
    return ndp.map(lambda t: ndp.reduce(ndp.add, t), ndp.split(x, 64))


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def matrix(dev, family, n, avg, seed):
    indptr, indices, data, shape = inputs.sparse_matrix(family, n, avg, seed=seed)
    x = np.random.default_rng(seed).standard_normal(shape[1]).astype(np.float32)
    args = tuple(dev.asarray(a) for a in (data, indices, indptr, x))
    return args, sp.csr_matrix((data, indices, indptr), shape=shape) @ x, (indptr, data)


def test_inferred_features_irregular_and_uniform(dev):
    prog = spmv.generate(dev)
    assert prog.feature_kind == "irregular"
    args, _, (indptr, data) = matrix(dev, "power_law", 900, 12.0, 1)
    rows, avg, cv, longest = prog.features(*args)
    lengths = np.diff(indptr)
    assert rows == pytest.approx(math.log2(1 + 900))
    assert avg == pytest.approx(math.log2(1 + data.size / 900))
    assert cv == pytest.approx(lengths[:: max(1, 900 // 256)].std() / lengths[:: max(1, 900 // 256)].mean())
    assert longest == pytest.approx(math.log2((1 + lengths.max()) / (1 + data.size / 900)))
    args2, _, _ = matrix(dev, "constant_row", 900, 12.0, 1)
    assert prog.features(*args2)[2] < 0.1 < cv  # near-constant rows vs power-law rows
    u = tile_sums.generate(dev)
    assert u.feature_kind == "uniform"
    n, tiles, aspect = u.features(dev.asarray(np.ones(64 * 50, np.float32)))
    assert tiles == pytest.approx(math.log2(51)) and aspect == pytest.approx(math.log2(64 / 50))


def test_variants_carry_their_policy_space_and_train_end_to_end(dev):
    prog = spmv.generate(dev, keep_features=True)
    cv = prog.code_variant()
    assert cv.variant_names == prog.variant_names and cv.default_name == "independent.cooperative"
    assert cv.feature_names == ["log2_rows", "log2_avg_row_length", "row_length_cv", "log2_max_over_avg"]
    assert cv.space_of("independent.cooperative") is prog.spaces["independent.cooperative"]
    assert cv.space_of("sequential.sequential").names == ("enable_unroll",)
    train = {f"{fam}{i}": matrix(dev, fam, 400 + 300 * i, avg, i)[0]
             for i, (fam, avg) in enumerate([("constant_row", 3.0), ("power_law", 20.0), ("arrow", 4.0),
                                             ("uniform_random", 40.0)])}
    report = cv.train(train, model="tree", repeats=3, search_budget=2, min_sample_ms=0.2,
                      progress=False)
    assert report.labels_used == 4 and not report.failures
    assert {lab.split("[")[0] for lab in report.labels} <= set(prog.variant_names)
    args, ref, _ = matrix(dev, "banded", 800, 9.0, 11)
    label = cv.select(*args)
    assert label.variant in prog.variant_names
    y = prog(*args)  # dispatch through the model
    np.testing.assert_allclose(dev.to_host(y), ref, rtol=1e-4, atol=1e-4)
    text = prog.explain(*args)
    assert "model (tree) picks" in text and label.variant in text
    assert "map.reduce" in text and "fused into it" in text and "policy space in all" in text


def test_explain_before_training_names_default_and_pruning(dev):
    @ndp.computation(x="f32")
    def total(x):
        return ndp.reduce(ndp.add, x)

    prog = total.generate(dev, platform=ndp.Platform("one-level", parallel_levels=0))
    assert prog.variant_names == ["sequential"]
    text = prog.explain(dev.asarray(np.ones(10, np.float32)))
    assert "pruned cooperative" in text and "untrained" in text
    assert float(dev.to_host(prog(dev.asarray(np.ones(10, np.float32))))[0]) == 10.0


def test_bind_matches_run_and_features_can_be_kept_or_cheap(dev):
    args, ref, _ = matrix(dev, "near_diagonal", 600, 8.0, 21)
    prog = spmv.generate(dev, keep_features=True)
    config = prog.default_policy("independent.cooperative")
    call = prog.bind("independent.cooperative", *args, **config)
    np.testing.assert_allclose(dev.to_host(call()), dev.to_host(prog.run("independent.cooperative", *args)),
                               rtol=1e-6)
    np.testing.assert_allclose(dev.to_host(call()), ref, rtol=1e-4, atol=1e-4)
    first = prog.features(*args)
    assert prog.features(*args) is first  # kept with the offsets array: no second pass
    cheap = spmv.generate(dev, row_spread=False)
    assert cheap.feature_names == ["log2_rows", "log2_avg_row_length"]
    assert cheap.features(*args) == first[:2]
