"""BFS variants (dialect source) on PoCL against SciPy's breadth-first order, over every graph family;
the graph generators and the degree features."""

import numpy as np
import pytest

from adaptune.kernels import bfs, features, inputs
from adaptune.kernels.device import OpenCLDevice


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


@pytest.mark.parametrize("family", inputs.GRAPH_FAMILIES)
def test_every_variant_matches_scipy(dev, family):
    indptr, indices = inputs.graph(family, 3000, 6.0, seed=5)
    source = int(np.argmax(np.diff(indptr)))
    want = bfs.reference_levels(indptr, indices, source)
    g = bfs.upload(dev, indptr, indices)
    for name, run in bfs.variants().items():
        got = dev.to_host(run(g, source))  # buffers are reused: every search must reset them
        np.testing.assert_array_equal(got, want, err_msg=f"{family}/{name}")


def test_unreached_vertices_and_other_sources(dev):
    # two components and an isolated vertex: levels stay UNVISITED outside the source's component
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (2, 4), (5, 6), (6, 7)]
    n = 9
    rows = [u for u, v in edges] + [v for u, v in edges]
    cols = [v for u, v in edges] + [u for u, v in edges]
    order = np.lexsort((cols, rows))
    indices = np.array(cols, np.int32)[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int32)
    g = bfs.upload(dev, indptr, indices)
    for source in (0, 4, 6, 8):
        want = bfs.reference_levels(indptr, indices, source)
        for name, run in bfs.variants().items():
            np.testing.assert_array_equal(dev.to_host(run(g, source)), want, err_msg=f"{source}/{name}")
    assert bfs.reference_levels(indptr, indices, 0)[5] == bfs.UNVISITED
    with pytest.raises(ValueError, match="source 9"):
        bfs.queue_thread(g, 9)


def test_graphs_are_symmetric_and_families_differ():
    import scipy.sparse as sp

    depth = {}
    for family in inputs.GRAPH_FAMILIES:
        indptr, indices = inputs.graph(family, 4000, 8.0, seed=1)
        n = len(indptr) - 1
        a = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
        assert (a != a.T).nnz == 0 and a.diagonal().sum() == 0 and a.has_canonical_format, family
        levels = bfs.reference_levels(indptr, indices, int(np.argmax(np.diff(indptr))))
        depth[family] = int(levels[levels != bfs.UNVISITED].max())
    assert depth["grid_2d"] > 5 * depth["rmat"] and depth["road_like"] > 5 * depth["erdos_renyi"]
    assert len(inputs.GRAPH_FAMILIES) >= 12
    with pytest.raises(ValueError, match="unknown graph family"):
        inputs.graph("hypercube", 100, 3, 0)


@pytest.mark.parametrize("family", ["power_law", "grid_3d", "hub_spoke"])
def test_degree_features(dev, family):
    indptr, indices = inputs.graph(family, 5000, 7.0, seed=2)
    g = bfs.upload(dev, indptr, indices)
    got = features.bfs_features(g)
    want = features.bfs_features_reference(indptr, indices)
    for key in features.BFS_FEATURES:
        assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-4), key
    assert features.bfs_features(g) == got and "features" in g.extra  # kept with the graph


@pytest.mark.parametrize("family", ["rmat", "grid_2d", "road_like", "small_world"])
def test_structure_probe_matches_the_host_search(dev, family):
    """The probe's bounded searches count exactly what the host's do (whole frontiers are expanded)."""
    indptr, indices = inputs.graph(family, 20_000, 5.0, seed=4)
    g = bfs.upload(dev, indptr, indices)
    got = features.bfs_probe(g)
    np.testing.assert_array_equal(got, features.bfs_probe_reference(indptr, indices))
    np.testing.assert_array_equal(features.bfs_probe(g), got)  # a second call (new stamp generation) agrees
    assert (np.diff(got.astype(np.int64), axis=1) >= 0).all()


def test_probe_tells_meshes_from_small_world_graphs(dev):
    """What Nitro's degree features cannot: a 2-D grid and a random regular graph of one degree differ in depth."""
    feats = {}
    for family in ("grid_2d", "random_regular"):
        indptr, indices = inputs.graph(family, 40_000, 4.0, seed=1)
        feats[family] = features.bfs_features(bfs.upload(dev, indptr, indices))
    grid, rand = feats["grid_2d"], feats["random_regular"]
    assert grid["est_depth"] > 5 * rand["est_depth"] and grid["probe_levels"] > 3 * rand["probe_levels"]
    assert grid["probe_dimension"] < 3.0 < rand["probe_dimension"]
