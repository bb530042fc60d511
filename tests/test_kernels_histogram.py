"""Histogram kernels (dialect source) on PoCL against numpy.bincount over key widths and bin counts, the
shared-memory constraint, and the sub-sample features."""

import numpy as np
import pytest

from adaptune.kernels import features, histogram, inputs
from adaptune.kernels.device import OpenCLDevice


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


CASES = [("uniform", 16, 8), ("constant", 256, 8), ("zipf", 1024, 16), ("image", 4096, 32),
         ("sorted_runs", 65536, 16), ("few_values", 64, 32), ("mixed_regions", 16384, 32)]


@pytest.mark.parametrize(("kind", "bins", "bits"), CASES)
def test_all_variants_match_bincount(dev, kind, bins, bits):
    keys = inputs.histogram_data(kind, 30_003, seed=4, bins=bins, key_bits=bits)  # partial last word
    assert keys.dtype == inputs.KEY_BITS[bits] and keys.max() < bins
    want = histogram.reference(keys, bins)
    d = histogram.upload(dev, keys, bins)
    out = dev.zeros(bins, np.uint32)
    for name, run in histogram.variants().items():
        if not histogram.available(d, name):
            assert name.startswith("shared") and bins * histogram.ALGORITHMS[name][1] > histogram.SHARED_WORDS
            with pytest.raises(histogram.HistogramConstraintError, match="shared words"):
                run(d, out)
            continue
        got = dev.to_host(run(d, out))  # a reused output buffer must be re-zeroed by the variant
        np.testing.assert_array_equal(got, want, err_msg=f"{kind}/{bins}/{bits}/{name}")


def test_keys_beyond_the_bins_are_ignored(dev):
    keys = np.array([0, 1, 15, 16, 200, 3, 3, 255] * 100 + [7], dtype=np.uint8)
    d = histogram.upload(dev, keys, 16)
    for name, run in histogram.variants().items():
        np.testing.assert_array_equal(dev.to_host(run(d)), histogram.reference(keys, 16), err_msg=name)


@pytest.mark.parametrize("n", [1, 3, 5, 4097])
def test_tiny_inputs(dev, n):
    keys = np.random.default_rng(n).integers(0, 300, n).astype(np.uint16)
    d = histogram.upload(dev, keys, 256)
    for name, run in histogram.variants().items():
        np.testing.assert_array_equal(dev.to_host(run(d)), histogram.reference(keys, 256), err_msg=name)


def test_bad_input_is_refused(dev):
    with pytest.raises(ValueError, match="uint8, uint16 or uint32"):
        histogram.upload(dev, np.zeros(10, np.int32), 16)
    with pytest.raises(ValueError, match="bins must be"):
        histogram.upload(dev, np.zeros(10, np.uint8), 0)
    with pytest.raises(ValueError, match="unknown histogram variant"):
        histogram.histogram(histogram.upload(dev, np.zeros(8, np.uint8), 16), "radix")
    with pytest.raises(ValueError, match="bins must fit"):
        inputs.histogram_data("uniform", 10, 0, bins=1024, key_bits=8)


@pytest.mark.parametrize(("kind", "bins", "bits"), [("uniform", 65536, 32), ("constant", 16, 8),
                                                    ("sorted_runs", 256, 16), ("zipf", 4096, 16)])
def test_subsample_features(dev, kind, bins, bits):
    keys = inputs.histogram_data(kind, 200_001, seed=9, bins=bins, key_bits=bits)
    got = features.histogram_features(histogram.upload(dev, keys, bins))
    want = features.histogram_features_reference(keys, bins)
    for key in features.HISTOGRAM_FEATURES:
        assert got[key] == pytest.approx(want[key], rel=1e-3, abs=1e-3), key
    if kind == "constant":
        assert got["collision_share"] == 1.0 and got["neighbour_share"] == 1.0
    if kind == "uniform":
        assert got["collision_share"] < 0.01
