"""NDP computations generated into the dialect and run on PoCL, every schedule checked against NumPy/SciPy."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from adaptune.kernels import inputs
from adaptune.kernels.device import OpenCLDevice
from adaptune.lang import ndp

THRESHOLD = 0.25


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


@ndp.computation(values="f32", columns="i32", offsets="i32", x="f32")
def spmv(values, columns, offsets, x):
    rows, cols = ndp.nest(values, offsets), ndp.nest(columns, offsets)
    return ndp.map(lambda r, c: ndp.reduce(ndp.add, ndp.map(lambda a, b: a * b, r, ndp.gather(x, c))), rows, cols)


@ndp.computation(x="f32")
def sum_of_squares(x):
    return ndp.reduce(ndp.add, ndp.map(lambda v: v * v, x))


@ndp.computation(x="i32")
def prefix(x):
    return ndp.scan(ndp.add, x, 5)


@ndp.computation(x="f32")
def keep_large(x):
    return ndp.compact(lambda v: v > THRESHOLD, x)


@ndp.computation(values="f32", keys="i32")
def sum_by_key(values, keys):
    return ndp.reduce_by_key(ndp.add, values, keys)


@ndp.computation(values="f32", offsets="i32")
def row_max(values, offsets):
    return ndp.map(lambda r: ndp.reduce(ndp.max, r), ndp.nest(values, offsets))


@ndp.computation(values="f32", offsets="i32")
def scale_rows(values, offsets):
    return ndp.map(lambda r: ndp.map(lambda v: 2.0 * v + 1.0, r), ndp.nest(values, offsets))


@ndp.computation(x="f32")
def column_sums(x):
    return ndp.map(lambda col: ndp.reduce(ndp.add, col), ndp.transpose(ndp.split(x, 16)))


@ndp.computation(x="f32")
def tiled_sum(x):
    partial = ndp.map(lambda t: ndp.reduce(ndp.add, t), ndp.split(x, 100))
    return ndp.reduce(ndp.add, partial)


def clamp_sq(a, b):
    d = a - b
    return min(max(d * d, 0.0), 100.0)


@ndp.computation(a="f32", b="f32")
def views(a, b):
    idx = ndp.range(0, a, 1)
    return ndp.map(clamp_sq, ndp.reverse(a), ndp.gather(b, idx))


@ndp.computation(x="f32")
def every_other_reversed(x):
    return ndp.reduce(lambda p, q: p + q, ndp.striding(ndp.reverse(x), 2), 0.0)


def all_variants(prog, *args):
    return {v: prog.run(v, *args) for v in prog.variant_names}


def test_spmv_every_schedule_matches_scipy(dev):
    prog = spmv.generate(dev)
    assert prog.variant_names == ["independent.cooperative", "sequential.cooperative", "independent.sequential",
                                  "sequential.sequential"]
    for family in ("power_law", "stencil_2d", "arrow"):
        indptr, indices, data, shape = inputs.sparse_matrix(family, 700, 7.0, seed=5)
        x = np.random.default_rng(2).standard_normal(shape[1]).astype(np.float32)
        ref = sp.csr_matrix((data, indices, indptr), shape=shape).astype(np.float64) @ x
        tol = 1e-4 * (np.abs(sp.csr_matrix((data, indices, indptr), shape=shape)) @ np.abs(x)) + 1e-5
        args = tuple(dev.asarray(a) for a in (data, indices, indptr, x))
        for name, y in all_variants(prog, *args).items():
            assert np.all(np.abs(dev.to_host(y) - ref) <= tol), (family, name)
    # policies: logical warps of every width, and a work-group per row, all on the same kernel template
    for policy in ({"logical_warp_size": 2}, {"logical_warp_size": 16, "block_size": 64},
                   {"execution_resource": "block", "block_size": 128}):
        config = {**prog.default_policy("independent.cooperative"), **policy}
        y = dev.to_host(prog.run("independent.cooperative", *args, **config))
        assert np.all(np.abs(y - ref) <= tol), policy


def test_flat_reduce_and_lambda_operator(dev):
    x = np.random.default_rng(0).standard_normal(10_001).astype(np.float32)
    for name, out in all_variants(sum_of_squares.generate(dev), dev.asarray(x)).items():
        assert math.isclose(float(dev.to_host(out)[0]), float((x.astype(np.float64) ** 2).sum()), rel_tol=1e-4), name
    prog = every_other_reversed.generate(dev)
    for name, out in all_variants(prog, dev.asarray(x)).items():
        assert math.isclose(float(dev.to_host(out)[0]), float(x[::-1][::2].astype(np.float64).sum()),
                            rel_tol=1e-3, abs_tol=1e-3), name


@pytest.mark.parametrize("n", [1, 5000])
def test_exclusive_scan_every_schedule_and_algorithm(dev, n):
    x = np.random.default_rng(n).integers(-50, 50, n).astype(np.int32)
    ref = 5 + np.concatenate([[0], np.cumsum(x)[:-1]])
    prog = prefix.generate(dev)
    for name, out in all_variants(prog, dev.asarray(x)).items():
        np.testing.assert_array_equal(dev.to_host(out), ref, err_msg=name)
    for algo, block, grain in (("hillis_steele", 64, 8), ("blelloch", 64, 1)):
        out = prog.run("cooperative", dev.asarray(x), block_size=block, grain_size=grain, block_scan_algo=algo)
        np.testing.assert_array_equal(dev.to_host(out), ref, err_msg=f"{algo} {block} {grain}")


def test_stream_compaction_is_scan_then_scatter(dev):
    x = np.random.default_rng(3).standard_normal(3000).astype(np.float32)
    prog = keep_large.generate(dev)
    assert len(prog.variant_names) == 4  # scan {cooperative, sequential} x scatter {independent, sequential}
    for name, out in all_variants(prog, dev.asarray(x)).items():
        np.testing.assert_array_equal(dev.to_host(out), x[x > THRESHOLD], err_msg=name)


def test_reduce_by_key_runs_of_keys(dev):
    rng = np.random.default_rng(4)
    lengths = np.concatenate([rng.integers(1, 4, 200), [500], rng.integers(1, 40, 50)])
    keys = np.repeat(rng.permutation(len(lengths)).astype(np.int32), lengths)
    values = rng.standard_normal(keys.size).astype(np.float32)
    starts = np.concatenate([[0], np.flatnonzero(keys[1:] != keys[:-1]) + 1])
    ref_keys, ref_sums = keys[starts], np.add.reduceat(values.astype(np.float64), starts)
    prog = sum_by_key.generate(dev)
    for name, (k, v) in all_variants(prog, dev.asarray(values), dev.asarray(keys)).items():
        np.testing.assert_array_equal(dev.to_host(k), ref_keys, err_msg=name)
        np.testing.assert_allclose(dev.to_host(v), ref_sums, rtol=1e-4, atol=1e-4, err_msg=name)


def test_row_max_and_row_map_with_empty_rows(dev):
    offsets = np.array([0, 3, 3, 10, 11, 40, 40], dtype=np.int32)
    values = np.random.default_rng(5).standard_normal(40).astype(np.float32)
    args = (dev.asarray(values), dev.asarray(offsets))
    ref_max = [values[a:b].max() if b > a else -np.inf for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    for name, out in all_variants(row_max.generate(dev), *args).items():
        np.testing.assert_array_equal(dev.to_host(out), np.float32(ref_max), err_msg=name)
    prog = scale_rows.generate(dev)
    assert prog.variant_names[0] == "independent.independent"
    for name, out in all_variants(prog, *args).items():
        np.testing.assert_allclose(dev.to_host(out), 2 * values + 1, rtol=1e-6, err_msg=name)


def test_uniform_nests_split_and_transpose(dev):
    x = np.random.default_rng(6).standard_normal(16 * 37).astype(np.float32)
    for name, out in all_variants(column_sums.generate(dev), dev.asarray(x)).items():
        np.testing.assert_allclose(dev.to_host(out), x.reshape(37, 16).sum(axis=0), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    y = np.random.default_rng(7).standard_normal(1234).astype(np.float32)
    prog = tiled_sum.generate(dev)
    assert [s.kind for s in prog.stages] == ["segreduce", "reduce"]
    for name, out in all_variants(prog, dev.asarray(y)).items():
        assert math.isclose(float(dev.to_host(out)[0]), float(y.astype(np.float64).sum()), rel_tol=1e-4,
                            abs_tol=1e-4), name
    with pytest.raises(ndp.NdpError, match="multiple of the tile"):
        column_sums.generate(dev).run("independent.cooperative", dev.asarray(x[:-1]))


def test_views_range_reverse_gather_and_def_translation(dev):
    a = np.random.default_rng(8).standard_normal(999).astype(np.float32)
    b = np.random.default_rng(9).standard_normal(999).astype(np.float32) * 10
    ref = np.minimum(np.maximum((a[::-1] - b) ** 2, 0.0), 100.0)
    for name, out in all_variants(views.generate(dev), dev.asarray(a), dev.asarray(b)).items():
        np.testing.assert_allclose(dev.to_host(out), ref, rtol=1e-5, err_msg=name)


def test_bad_inputs_are_named(dev):
    prog = sum_of_squares.generate(dev)
    with pytest.raises(ndp.NdpError, match="must be f32"):
        prog.run("cooperative", dev.asarray(np.arange(4, dtype=np.int32)))
    with pytest.raises(ndp.NdpError, match="takes 1 arrays"):
        prog.run("cooperative")
    with pytest.raises(ndp.NdpError, match="not valid"):
        prog.run("cooperative", dev.asarray(np.ones(4, np.float32)), block_size=8192, grain_size=1,
                 block_reduce_algo="tree")
    with pytest.raises(ndp.NdpError, match="shuffle|not valid"):  # warp shuffles are CUDA-only: pruned on PoCL
        prog.run("cooperative", dev.asarray(np.ones(4, np.float32)), block_size=256, grain_size=1,
                 block_reduce_algo="shuffle")
