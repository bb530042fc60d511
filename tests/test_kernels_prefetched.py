"""The prefetched first call: a distilled tree over host metadata and device features fitted on the recorded
H100 sort run (real run times), compiled over (object, features) pairs and saved as JSON; and
PrefetchedDispatch on real kernels on PoCL: features started at fix time and finished on the host as they land,
the feature tree once they are there, the host tree before, and the size gate."""

import json
import time
import types
from pathlib import Path

import numpy as np
import pytest

from adaptune.kernels import bfs, distilled, features, inputs, sampled, sort
from adaptune.kernels.device import OpenCLDevice
from adaptune.kernels.prefetched import PrefetchedDispatch

RAW = Path(__file__).resolve().parents[1] / "benchmarks/gpu_suite/results/gpu_suite_h100_raw.json"


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def _runtime(records, names, default):
    """Recorded run times, a refused variant costing the default's (as dispatch falls back)."""
    d = names.index(default)
    out = np.array([[r["times_ms"][v] if r["times_ms"][v] is not None else np.inf for v in names] for r in records])
    for i, r in enumerate(records):
        out[i, [j for j, v in enumerate(names) if r["status"][v] == "constraint"]] = out[i, d]
    return out


def _rows(records, fnames):
    return np.array([list(distilled.metadata_from_info("sort", r["info"])) + [r["features"][k] for k in fnames]
                     for r in records], float)


def test_a_tree_over_host_metadata_and_device_features_fits_compiles_and_reloads():
    b = json.loads(RAW.read_text())["benchmarks"]["sort"]
    names, fnames = b["variants"], b["feature_names"]
    x_train, x_test = _rows(b["train"], fnames), _rows(b["test"], fnames)
    rt_train, rt_test = _runtime(b["train"], names, b["default"]), _runtime(b["test"], names, b["default"])
    n_host = len(distilled.HOST_METADATA["sort"])
    both = distilled.fit_tree(x_train, rt_train, names, max_depth=2, min_leaf=3)
    host = distilled.fit_tree(x_train[:, :n_host], rt_train, names, max_depth=2, min_leaf=3)
    rel = distilled.relative(rt_test)

    def score(tree, x):
        return float(np.mean([rel[i, names.index(distilled.predict(tree, row))] for i, row in enumerate(x)]))

    # sortedness is on the device only: with it the tree is far better on the held-out inputs
    assert score(both, x_test) > score(host, x_test[:, :n_host]) + 0.1
    assert any(f >= n_host for f in _split_features(both))
    # compiled over (object, features) pairs, and again after a JSON round trip: equal to the reference walk
    sources = distilled.pair_sources("sort", fnames)
    reloaded = json.loads(json.dumps(both))
    for tree in (both, reloaded):
        walk = distilled.compile_tree(tree, (0, sources[1]))
        for r, row in zip(b["test"], x_test, strict=True):
            keys = types.SimpleNamespace(size=r["info"]["n"], dtype=np.dtype(r["info"]["dtype"]))
            assert walk((keys, r["features"])) == distilled.predict(both, row)
    # the gate: the size from which a read of 0.5 us fits in 2 % of the run predicted from the training inputs
    sizes, best = x_train[:, 0], np.min(rt_train, axis=1)
    gate = distilled.size_gate(sizes, best, 0.5, 0.02)
    slope, icpt = np.polyfit(np.log(sizes), np.log(best), 1)
    assert np.exp(icpt + slope * np.log(gate)) * 0.02 == pytest.approx(0.5e-3)


def _split_features(tree):
    return [] if "leaf" in tree else [tree["feature"], *_split_features(tree["low"]), *_split_features(tree["high"])]


def _wait(pending):
    t0 = time.monotonic()
    while pending.value is None and time.monotonic() - t0 < 10:
        time.sleep(0.001)
    return pending.value


SORT_TREE = {"feature": 7, "threshold": 0.05,  # host metadata (3), then descent_share (device)
             "low": {"leaf": "presorted_radix"}, "high": {"leaf": "merge"}}


def test_prefetched_sort_dispatch_uses_the_features_once_on_the_host(dev):
    variants = sort.variants(with_torch=False)
    host_tree = {"leaf": "bitonic"}
    sel = PrefetchedDispatch("sort", host_tree, SORT_TREE, features.SORT_FEATURES, variants, "cub_radix")
    for order, want in (("sorted", "presorted_radix"), ("uniform", "merge")):
        keys = inputs.sort_keys(order, 30_000, "float32", seed=4)
        args = (dev, dev.asarray(keys))
        assert sel.select(*args) == "bitonic"  # not fixed: the host tree
        pending = sel.fix(*args)
        assert _wait(pending) == features.sort_features(dev, args[1])  # finished early = computed blocking
        assert sel.used_features(*args) and sel.select(*args) == want
        assert sel.select(*args) == "bitonic"  # a first call consumes the fixed features
        _wait(sel.fix(*args))
        np.testing.assert_array_equal(dev.to_host(sel(*args)), np.sort(keys))
    # the gate: below min_size the features are not started, and not read even when they are there
    small = PrefetchedDispatch("sort", host_tree, SORT_TREE, features.SORT_FEATURES, variants, "cub_radix",
                               min_size=1e9)
    args = (dev, dev.asarray(inputs.sort_keys("sorted", 30_000, "float32", seed=4)))
    assert small.fix(*args) is None and small.select(*args) == "bitonic"
    small.fix(*args, pending=features.Pending.finished(features.sort_features(dev, args[1])))
    assert not small.used_features(*args) and small.select(*args) == "bitonic"
    never = PrefetchedDispatch("sort", host_tree, SORT_TREE, features.SORT_FEATURES, variants, "cub_radix",
                               min_size=None)
    assert never.fix(*args) is None and never.select(*args) == "bitonic"


def test_prefetched_bfs_dispatch_on_kept_and_early_finished_features(dev):
    indptr, indices = inputs.graph("grid_2d", 6000, 4.0, seed=2)
    g = bfs.upload(dev, indptr, indices)
    source = int(np.argmax(np.diff(indptr)))
    tree = {"feature": 10, "threshold": 10.0,  # host metadata (3), then est_depth (device)
            "low": {"leaf": "edge_batched"}, "high": {"leaf": "topdown_batched"}}
    sel = PrefetchedDispatch("bfs", {"leaf": "queue_thread"}, tree, features.BFS_FEATURES, bfs.variants(),
                             "direction_optimising")
    want_features = features.bfs_features(g, cached=False)
    want = distilled.predict(tree, [g.n, g.m, g.m / g.n] + [want_features[k] for k in features.BFS_FEATURES])
    features.forget_features(g)
    assert _wait(sel.fix(g, source)) == want_features
    assert sel.select(g, source) == want
    assert features.bfs_features(g) == want_features  # the kernels' own read uses the early-finished features
    pending = sel.fix(g, source)  # kept with the graph now: no device work, on the host at once
    assert pending.value == want_features and sel.select(g, source) == want
    sel.fix(g, source)
    np.testing.assert_array_equal(dev.to_host(sel(g, source)), bfs.reference_levels(indptr, indices, source))
    with pytest.raises(ValueError, match="cusparse"):
        PrefetchedDispatch("bfs", {"leaf": "queue_thread"}, {"leaf": "cusparse"}, features.BFS_FEATURES,
                           bfs.variants(), "direction_optimising")


def test_sampled_bfs_features_are_the_sampled_rows_degrees_and_land_at_fix(dev):
    hub_ptr, hub_idx = inputs.graph("hub_spoke", 5000, 8.0, seed=3)
    grid_ptr, grid_idx = inputs.graph("grid_2d", 5000, 4.0, seed=3)
    tree = {"feature": 3 + 1, "threshold": 0.2,  # host metadata (3), then sample_degree_cv
            "low": {"leaf": "topdown_batched"}, "high": {"leaf": "edge_batched"}}
    sel = PrefetchedDispatch("bfs", {"leaf": "queue_thread"}, tree, sampled.BFS_SAMPLE_FEATURES, bfs.variants(),
                             "direction_optimising")
    for indptr, indices, want in ((hub_ptr, hub_idx, "edge_batched"), (grid_ptr, grid_idx, "topdown_batched")):
        g = bfs.upload(dev, indptr, indices)
        rows = sampled.sample_rows(g.n)
        deg = np.diff(indptr)[rows].astype(float)
        got = sampled.bfs_sample_features(g)
        assert got == pytest.approx({"sample_degree_sd": deg.std(), "sample_degree_cv": deg.std() / (g.m / g.n),
                                     "sample_max_over_avg": deg.max() / (g.m / g.n)})
        assert sel.select(g, 0) == "queue_thread"  # not fixed: the host tree
        pending = sel.fix(g, 0)
        assert pending.value == got and not features.kept_features(g)  # on the host at once, no device features
        assert sel.select(g, 0) == want and sel.select(g, 0) == "queue_thread"  # consumed by the first call
    mixed = {**tree, "high": {"feature": 3 + 3 + 3, "threshold": 1.0,  # ... then degree_sd of the device features
                              "low": {"leaf": "edge_batched"}, "high": {"leaf": "queue_thread"}}}
    with pytest.raises(ValueError, match="sampled features .*sample_degree_cv.* and device features .*degree_sd"):
        PrefetchedDispatch("bfs", {"leaf": "queue_thread"}, mixed, sampled.BFS_SAMPLE_FEATURES + features.BFS_FEATURES,
                           bfs.variants(), "direction_optimising")


def test_the_gate_finds_every_fixed_object_and_forgets_each(dev):
    graphs = [bfs.upload(dev, *inputs.graph("grid_2d", 400 + 100 * i, 4.0, seed=i)) for i in range(3)]
    tree = {"feature": 0, "threshold": 550.0, "low": {"leaf": "edge_batched"}, "high": {"leaf": "topdown_batched"}}
    host = {"leaf": "queue_thread"}
    sel = PrefetchedDispatch("bfs", host, tree, features.BFS_FEATURES, bfs.variants(), "direction_optimising")
    landed = [features.Pending.finished({k: 0.0 for k in features.BFS_FEATURES}) for _ in graphs]
    for g, p in zip(graphs, landed, strict=True):
        sel.fix(g, 0, pending=p)
    sel.forget(graphs[1], 0)
    # the last fixed (cells), an earlier one (by id), a forgotten one (host tree); each used once
    assert [sel.select(g, 0) for g in graphs] == ["edge_batched", "queue_thread", "topdown_batched"]
    assert [sel.select(g, 0) for g in graphs] == ["queue_thread"] * 3
    not_landed = features.Pending([], lambda: None, lambda: False, lambda hosts: {})
    sel.fix(graphs[0], 0, pending=not_landed)
    assert sel.select(graphs[0], 0) == "queue_thread" and sel.used_features(graphs[0], 0) is False
    not_landed.value = landed[0].value  # lands later: the next call takes it
    assert sel.select(graphs[0], 0) == "edge_batched"
    # below the gate a given Pending is not kept; min_size None: never read, the host tree's walk itself
    small = PrefetchedDispatch("bfs", host, tree, features.BFS_FEATURES, bfs.variants(), "direction_optimising",
                               min_size=1e9)
    small.fix(graphs[0], 0, pending=landed[0])
    assert not small.used_features(graphs[0], 0) and small.select(graphs[0], 0) == "queue_thread"


def test_sampled_sort_features_are_the_few_pairs_order_and_land_at_fix(dev):
    tree = {"feature": 3 + 1, "threshold": 0.25,  # host metadata (3), then sample_descent_share
            "low": {"leaf": "presorted_radix"}, "high": {"leaf": "merge"}}
    sel = PrefetchedDispatch("sort", {"leaf": "bitonic"}, tree, sampled.SORT_SAMPLE_FEATURES,
                             sort.variants(with_torch=False), "cub_radix")
    for order, want in (("almost_sorted", "presorted_radix"), ("uniform", "merge")):
        keys = inputs.sort_keys(order, 30_000, "float32", seed=5)
        args = (dev, dev.asarray(keys))
        got = sampled.sort_sample_features(*args)
        assert got == sampled.sort_sample_reference(keys) and set(got) == set(sampled.SORT_SAMPLE_FEATURES)
        pending = sel.fix(*args)
        assert pending.value == got and sel.select(*args) == want and sel.select(*args) == "bitonic"
