"""prefetch_features: features started without waiting (Nitro's fix_inputs) give what a blocking computation
gives, on real kernels on PoCL, and are then kept with the object."""

import numpy as np
import pytest

from adaptune.kernels import bfs, features, histogram, inputs, spmv
from adaptune.kernels.device import OpenCLDevice


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def _objects(dev):
    indptr, indices, data, shape = inputs.sparse_matrix("power_law", 3000, 8.0, seed=1)
    yield spmv.upload(dev, indptr, indices, data, shape), features.spmv_features
    keys = inputs.histogram_data("zipf", 50_000, seed=2, bins=1024, key_bits=16)
    yield histogram.upload(dev, keys, 1024), features.histogram_features
    gp, gi = inputs.graph("grid_2d", 10_000, 4.0, seed=3)
    yield bfs.upload(dev, gp, gi), features.bfs_features


def test_prefetched_features_equal_blocking_ones_and_are_kept(dev):
    for obj, compute in _objects(dev):
        want = compute(obj, cached=False)
        features.forget_features(obj)
        pending = features.prefetch_features(obj)
        assert pending is not None and any(k[0] == "pending" for k in obj.extra if isinstance(k, tuple))
        got = compute(obj)  # waits for the pending copy, computes nothing again
        assert got == want
        assert not any(isinstance(k, tuple) and k[0] == "pending" for k in obj.extra)
        assert pending.ready()
        assert features.prefetch_features(obj) is None  # kept: nothing to start
        assert compute(obj) == want


def test_forget_drops_a_pending_computation_and_other_objects_are_refused(dev):
    obj, compute = next(_objects(dev))
    features.prefetch_features(obj)
    features.forget_features(obj)
    assert not [k for k in obj.extra if isinstance(k, tuple) and k[0] in ("pending", "features")]
    assert compute(obj) == compute(obj, cached=False)
    with pytest.raises(TypeError, match="DeviceMatrix"):
        features.prefetch_features(np.zeros(3))
