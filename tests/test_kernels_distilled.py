"""The distilled first-call selector: a cost-aware tree over host metadata, compiled into closures. Fitting
is checked on constructed costs (deterministic, the right split found), the compiled selector against the
tree's reference walk, and DistilledDispatch on real kernels on PoCL against NumPy/SciPy, constraint
fall-back included."""

import json
import types

import numpy as np
import pytest
import scipy.sparse as sp

from adaptune.adaptive.compiled import compile_predictor
from adaptune.adaptive.models import fit_model
from adaptune.kernels import bfs, distilled, features, histogram, inputs, sort, spmv
from adaptune.kernels.device import OpenCLDevice
from adaptune.kernels.dispatch import DistilledDispatch, FeatureTreeDispatch, default_checks
from adaptune.kernels.prefetched import PrefetchedDispatch


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def _costs(rng, n=60):
    """Three variants: `a` is best below bins 1000, `b` above, `c` never; noise on top."""
    x = np.column_stack([2.0 ** rng.integers(4, 17, n), rng.integers(0, 2, n).astype(float)])
    base = np.where(x[:, :1] <= 1000, [[1.0, 2.0, 3.0]], [[2.5, 1.0, 3.0]])
    return x, base * (1 + 0.05 * rng.random((n, 3)))


def test_the_tree_finds_the_split_that_changes_the_winner_and_is_deterministic():
    x, runtime = _costs(np.random.default_rng(3))
    names = ["a", "b", "c"]
    tree = distilled.fit_tree(x, runtime, names, max_depth=3, min_leaf=2)
    assert tree["feature"] == 0 and 512 < tree["threshold"] < 2048
    assert distilled.leaf_names(tree) == ["a", "b"] and distilled.tree_depth(tree) == 1
    again = distilled.distil(x, runtime, names)
    assert json.dumps(again, sort_keys=True) == json.dumps(distilled.distil(x, runtime, names), sort_keys=True)
    assert again["tree"] == tree and again["cv_fraction_of_oracle"] > 0.9


def test_compiled_selector_equals_the_reference_walk():
    rng = np.random.default_rng(7)
    x = rng.random((200, 3)) * [1e6, 50, 1]
    runtime = np.column_stack([x[:, 0] / 1e5 + 1, x[:, 1] / 5 + 1, 10 * x[:, 2] + 0.5, 3 + 0 * x[:, 0]])
    names = ["p", "q", "r", "s"]
    tree = distilled.fit_tree(x, runtime, names, max_depth=5, min_leaf=1)
    assert distilled.tree_depth(tree) >= 2
    sources = (1, (("attr", "f0"), ("ratio", "f1", "one"), ("attr", "f2")))
    select = distilled.compile_tree(tree, sources)
    rows = rng.random((500, 3)) * [1e6, 50, 1]
    objs = [types.SimpleNamespace(f0=r[0], f1=r[1], one=1.0, f2=r[2]) for r in rows]
    assert all(select(None, o) == distilled.predict(tree, row) for o, row in zip(objs, rows, strict=True))
    # a refused leaf falls back to the default
    refuse = distilled.compile_tree(tree, sources, {v: (lambda o: False) for v in names}, "s")
    assert {refuse(None, o) for o in objs} == {"s"}


def test_every_node_form_equals_the_reference_walk_with_checks():
    # depth-2 trees over attributes (one closure), over items, a ratio root, single leaves; checks refuse some leaves
    rng = np.random.default_rng(11)
    x = rng.random((300, 3)) * [1e6, 50, 1]
    runtime = np.column_stack([x[:, 0] / 1e5 + 1, x[:, 1] / 5 + 1, 10 * x[:, 2] + 0.5, 3 + 0 * x[:, 0]])
    names = ["p", "q", "r", "s"]
    objs = [types.SimpleNamespace(f0=r[0], f1=r[1], one=1.0, f2=r[2]) for r in x]
    checks = {"q": lambda o: o.f2 > 0.5, "r": lambda o: o.f0 > 3e5}

    def want(tree, row, o):
        v = distilled.predict(tree, row)
        return v if v not in checks or checks[v](o) else "s"

    for depth in (0, 1, 2, 3):
        tree = distilled.fit_tree(x, runtime, names, max_depth=depth, min_leaf=1) if depth else {"leaf": "q"}
        for sources in ((0, (("attr", "f0"), ("attr", "f1"), ("attr", "f2"))),
                        (0, (("attr", "f0"), ("ratio", "f1", "one"), ("attr", "f2")))):
            select = distilled.compile_tree(tree, sources, checks, "s")
            assert [select(o) for o in objs] == [want(tree, r, o) for r, o in zip(x, objs, strict=True)]
        walk = distilled.compile_tree(tree, (0, tuple(("item", i) for i in range(3))))
        assert [walk(list(r)) for r in x] == [distilled.predict(tree, r) for r in x]
    assert distilled.tree_depth(tree) == 3 and "leaf" not in tree["low"]


def test_the_leaf_picks_the_best_summed_fraction_not_the_most_wins():
    # `a` wins 3 of 5 inputs narrowly, `b` loses those by 5 % and wins the other 2 by 3x: b has the larger sum
    runtime = np.array([[1.0, 1.05]] * 3 + [[3.0, 1.0]] * 2)
    tree = distilled.fit_tree(np.zeros((5, 1)), runtime, ["a", "b"], max_depth=2)
    assert tree == {"leaf": "b"}


def _matrix(dev, family, n, avg, seed=1):
    indptr, indices, data, shape = inputs.sparse_matrix(family, n, avg, seed=seed)
    m = spmv.upload(dev, indptr, indices, data, shape)
    a = sp.csr_matrix((data, indices, indptr), shape=shape).astype(np.float64)
    return m, a


def test_spmv_dispatch_picks_valid_variants_and_matches_scipy(dev):
    tree = {"feature": 4, "threshold": 0.5,  # dia_built
            "low": {"feature": 2, "threshold": 8.0, "low": {"leaf": "csr_scalar"}, "high": {"leaf": "csr_vector_8"}},
            "high": {"leaf": "dia"}}
    variants = spmv.variants(with_libraries=False)
    dd = DistilledDispatch("spmv", tree, variants, default="csr_scalar")
    seen = set()
    for family, avg in (("banded", 5.0), ("power_law", 4.0), ("uniform_random", 24.0)):
        m, a = _matrix(dev, family, 3000, avg)
        x = np.random.default_rng(0).standard_normal(m.n_cols).astype(np.float32)
        args = (m, dev.asarray(x), dev.zeros(m.n_rows, np.float32))
        meta = distilled.read_metadata("spmv", *args)
        info = {"n_rows": m.n_rows, "nnz": m.nnz, "ell_built": m.ell is not None, "dia_built": m.dia is not None}
        assert meta == distilled.metadata_from_info("spmv", info)  # recorded and live metadata agree
        name = dd.select(*args)
        assert name == distilled.predict(tree, meta) and spmv.available(m, name)
        assert dd.bind(*args) is variants[name]
        seen.add(name)
        dd(*args)
        np.testing.assert_allclose(dev.to_host(args[2]), a @ x, rtol=1e-4, atol=1e-4)
    assert "dia" in seen and len(seen) >= 2
    # a tree that always says DIA falls back to the default where DIA was not built
    always = DistilledDispatch("spmv", {"leaf": "dia"}, variants, default="csr_scalar")
    m, a = _matrix(dev, "power_law", 3000, 4.0)
    assert m.dia is None and always.select(m, None, None) == "csr_scalar"
    assert always.bind(m, None, None) is variants["csr_scalar"]


def test_histogram_dispatch_falls_back_where_shared_memory_does_not_fit(dev):
    tree = {"feature": 1, "threshold": 256.0, "low": {"leaf": "shared_x32"}, "high": {"leaf": "global_runs"}}
    variants = histogram.variants()
    dd = DistilledDispatch("histogram", tree, variants, default="global")
    for bins, bits, want in ((64, 8, "shared_x32"), (4096, 16, "global_runs")):
        keys = inputs.histogram_data("zipf", 20_001, seed=2, bins=bins, key_bits=bits)
        d = histogram.upload(dev, keys, bins)
        out = dev.zeros(bins, np.uint32)
        info = {"n": d.n, "bins": bins, "key_bits": bits}
        assert distilled.read_metadata("histogram", d, out) == distilled.metadata_from_info("histogram", info)
        assert dd.select(d, out) == want
        np.testing.assert_array_equal(dev.to_host(dd(d, out)), histogram.reference(keys, bins))
    keys = inputs.histogram_data("uniform", 20_001, seed=2, bins=1024, key_bits=16)
    d = histogram.upload(dev, keys, 1024)  # 1024 bins x 32 copies does not fit: the default runs
    assert not histogram.available(d, "shared_x32")
    assert DistilledDispatch("histogram", {"leaf": "shared_x32"}, variants, "global").select(d, None) == "global"


def test_sort_and_bfs_metadata_and_dispatch(dev):
    keys = inputs.sort_keys("with_nans", 5000, "float32", seed=3)
    info = {"n": keys.size, "dtype": str(keys.dtype)}
    assert distilled.read_metadata("sort", dev, keys) == distilled.metadata_from_info("sort", info) == (5000, 32, True)
    tree = {"feature": 2, "threshold": 0.5, "low": {"leaf": "bitonic"}, "high": {"leaf": "merge"}}
    dd = DistilledDispatch("sort", tree, sort.variants(with_torch=False), default="cub_radix")
    assert dd.select(dev, keys) == "merge"
    got = dev.to_host(dd(dev, dev.asarray(keys)))
    np.testing.assert_array_equal(got, np.sort(keys))
    indptr, indices = inputs.graph("grid_2d", 4000, 4.0, seed=1)
    g = bfs.upload(dev, indptr, indices)
    assert distilled.read_metadata("bfs", g, 0) == distilled.metadata_from_info("bfs", {"n": g.n, "m": g.m})
    tree = {"feature": 2, "threshold": 8.0, "low": {"leaf": "edge_batched"}, "high": {"leaf": "queue_thread"}}
    dd = DistilledDispatch("bfs", tree, bfs.variants(), default="direction_optimising")
    source = int(np.argmax(np.diff(indptr)))
    assert dd.select(g, source) == "edge_batched"
    np.testing.assert_array_equal(dev.to_host(dd(g, source)), bfs.reference_levels(indptr, indices, source))


def test_default_checks_agree_with_the_kernels_constraints(dev):
    checks = default_checks("histogram")
    assert set(checks) == {"shared", "shared_x8", "shared_x32"}
    for bins in (2 ** k for k in range(4, 17)):
        d = histogram.upload(dev, np.zeros(64, np.uint16), bins)
        assert all(checks[v](d) == histogram.available(d, v) for v in histogram.ALGORITHMS if v in checks)
    checks = default_checks("spmv")
    for family, avg in (("banded", 5.0), ("power_law_heavy", 6.0), ("stencil_2d", 5.0)):
        m, _ = _matrix(dev, family, 2000, avg)
        assert all(checks[v](m) == spmv.available(m, v) for v in checks)


def test_a_tree_over_device_features_sorts_by_sortedness(dev):
    tree = {"feature": 4, "threshold": 0.05,  # descent_share of the sampled pairs
            "low": {"leaf": "presorted_radix"}, "high": {"leaf": "merge"}}
    variants = sort.variants(with_torch=False)
    dd = FeatureTreeDispatch("sort", tree, features.sort_features, features.SORT_FEATURES, variants, "cub_radix")
    for order, want in (("sorted", "presorted_radix"), ("reversed", "merge"), ("uniform", "merge")):
        keys = inputs.sort_keys(order, 20_000, "int64", seed=5)
        args = (dev, dev.asarray(keys))
        assert dd.select(*args) == want
        np.testing.assert_array_equal(dev.to_host(dd(*args)), np.sort(keys))


def test_a_tree_over_device_features_falls_back_where_refused(dev):
    tree = {"feature": 5, "threshold": 0.5, "low": {"leaf": "shared_x32"}, "high": {"leaf": "global_runs"}}
    dd = FeatureTreeDispatch("histogram", tree, lambda d, out: features.histogram_features(d), features.HISTOGRAM_FEATURES,
                             histogram.variants(), "global")
    for bins, want in ((64, "shared_x32"), (1024, "global")):  # 1024 bins x 32 copies do not fit
        keys = inputs.histogram_data("uniform", 20_001, seed=2, bins=bins, key_bits=16)
        d = histogram.upload(dev, keys, bins)
        out = dev.zeros(bins, np.uint32)
        assert dd.select(d, out) == want
        np.testing.assert_array_equal(dev.to_host(dd(d, out)), histogram.reference(keys, bins))


def test_unknown_variants_are_refused():
    with pytest.raises(ValueError, match="cusparse_alg1"):
        DistilledDispatch("spmv", {"leaf": "cusparse_alg1"}, spmv.variants(with_libraries=False), "csr_scalar")


def test_a_student_of_the_cost_model_picks_as_its_teacher_and_is_scored_on_the_same_folds():
    x, t = _costs(np.random.default_rng(7), 40)
    x = np.log2(x + 1)  # the features a model sees: log sizes
    names = ["a", "b", "c"]
    d = distilled.distil_model(x, t, names, resampled=1500, folds=3, repeats=1)
    teacher = compile_predictor(d["teacher"])
    assert d["teacher"].kind == "kernel_ridge" and distilled.tree_depth(d["tree"]) <= 8
    student = np.array([distilled.predict(d["tree"], r) for r in x])
    taught = np.array([names[int(teacher(r))] for r in x])
    best = np.array(names)[t.argmin(axis=1)]
    assert np.mean(student == taught) >= 0.9 and {"a", "b"} <= set(student)
    clear = (np.abs(x[:, 0] - np.log2(1000)) > 1.5) & (taught == best)  # away from the winner's change, where
    assert clear.sum() >= 20 and np.array_equal(student[clear], taught[clear])  # the teacher is right
    assert 0.95 <= d["cv_fraction_of_oracle"] <= 1.0 and 0.95 <= d["teacher_cv_fraction_of_oracle"] <= 1.0
    assert distilled.student_tree(d["teacher"], x, names, resampled=1500) == d["tree"]  # deterministic
    # several recipes on one teacher a fold: each student and every score as distil_model gives it alone
    many = distilled.distil_students(x, t, names, [{"resampled": 1500}, {"resampled": 1500, "max_depth": 2}],
                                     folds=3, repeats=1)
    assert many["students"][0]["tree"] == d["tree"] and distilled.tree_depth(many["students"][1]["tree"]) <= 2
    assert many["students"][0]["cv_fraction_of_oracle"] == d["cv_fraction_of_oracle"]
    assert many["teacher_cv_fraction_of_oracle"] == d["teacher_cv_fraction_of_oracle"]
    near = distilled.resample(x, 1000, 0.1, np.random.default_rng(0))
    assert near.shape == (1000, 2) and np.all(np.abs(near - x.mean(0)) < 10 * np.ptp(x, axis=0))


def _sort_costs(rng, n=48):
    """Sort-like training inputs: host metadata (n, key bits, float) say nothing of the order; presorted radix
    wins where few adjacent pairs descend, CUB radix elsewhere (a boundary in descent share and ties)."""
    sizes = 2.0 ** rng.integers(14, 24, n)
    host = np.column_stack([sizes, rng.choice([32.0, 64.0], n), rng.integers(0, 2, n).astype(float)])
    descent, ties = rng.random(n) * 0.5, rng.random(n) * 0.3
    device = np.column_stack([host, sizes * (1 - descent), descent, ties])  # as features.SORT_FEATURES
    presorted = descent + 0.5 * ties < 0.2
    base = np.where(presorted[:, None], [[2.0, 1.0, 3.0]], [[1.0, 2.5, 3.0]]) * (sizes[:, None] * 1e-6 + 0.05)
    return host, device, base * (1 + 0.05 * rng.random((n, 3)))


def test_distil_rule_takes_the_best_cross_validated_rule_and_the_gate_walks_a_student_once_landed():
    host, device, runtime = _sort_costs(np.random.default_rng(11))
    names = ["cub_radix", "presorted_radix", "bitonic"]
    recipe = {"jitter": 0.1, "max_depth": 4, "resampled": 500, "folds": 3, "repeats": 1}
    fit = distilled.distil_gated(host, device, runtime, names, 1.0, 0.02, "sort", students=[recipe])
    for rule in (fit["host"], fit["features"]):
        cvs = {k: c["cv_fraction_of_oracle"] for k, c in rule["candidates"].items()}
        assert len(cvs) == 2 and rule["cv_fraction_of_oracle"] == max(cvs.values())
        assert rule["tree"] == rule["candidates"][rule["rule"]]["tree"]
    assert fit["features"]["cv_fraction_of_oracle"] > fit["host"]["cv_fraction_of_oracle"] + 0.05  # order matters
    assert fit["min_size"] is not None and fit["min_size"] > 0
    # the student (over host metadata then device features) picks as its teacher where the teacher is sure
    x = np.column_stack([host, device])
    tree = fit["features"]["candidates"]["student (depth 4, jitter 0.1)"]["tree"]
    params = fit_model("cost", x, runtime, runtime).params  # distil_model's teacher on all training inputs
    assert distilled.student_tree(params, x, names, resampled=500, jitter=0.1, max_depth=4) == tree
    teacher = compile_predictor(params)
    taught = np.array([names[int(teacher(r))] for r in x])
    student = np.array([distilled.predict(tree, r) for r in x])
    best = np.array(names)[runtime.argmin(axis=1)]
    clear = (np.abs(device[:, 4] + 0.5 * device[:, 5] - 0.2) > 0.05) & (taught == best)  # away from the change
    assert clear.sum() >= 24 and np.mean(student[clear] == taught[clear]) >= 0.95
    assert np.mean(student == taught) >= 0.85 and {"cub_radix", "presorted_radix"} <= set(student)
    # the prefetched gate walks the student once the features are on the host, at and above min_size only
    sel = PrefetchedDispatch("sort", fit["host"]["tree"], tree, features.SORT_FEATURES,
                             sort.variants(with_torch=False), "cub_radix", min_size=fit["min_size"])
    for h, f in zip(host, device, strict=True):
        keys = np.empty(int(h[0]), np.float64 if h[2] else np.int64)  # .size / .dtype as on the device
        values = dict(zip(features.SORT_FEATURES, f, strict=True))
        if h[0] < fit["min_size"]:  # nothing started (above, fix would launch the feature kernels)
            assert sel.fix(None, keys) is None and sel.select(None, keys) == distilled.predict(fit["host"]["tree"], h)
        sel.fix(None, keys, pending=features.Pending.finished(values))
        want = (distilled.predict(tree, list(h) + list(f)) if h[0] >= fit["min_size"]
                else distilled.predict(fit["host"]["tree"], h))
        assert sel.select(None, keys) == want
    assert 0 < sum(host[:, 0] >= fit["min_size"]) < len(host)  # both sides of the gate were walked
