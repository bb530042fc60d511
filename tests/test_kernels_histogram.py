"""All six histogram kernels (dialect source) on PoCL against numpy.bincount, and the sub-sample features."""

import numpy as np
import pytest

from adaptune.kernels import features, histogram, inputs
from adaptune.kernels.device import OpenCLDevice


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


@pytest.mark.parametrize("kind", inputs.HISTOGRAM_KINDS)
def test_all_variants_match_bincount(dev, kind):
    data = inputs.histogram_data(kind, 50_003, seed=4)  # odd size: exercises the partial last word
    want = np.bincount(data, minlength=256)
    d = histogram.upload(dev, data)
    out, queue = dev.zeros(256, np.uint32), dev.zeros(1, np.uint32)
    for name, run in histogram.variants().items():
        got = dev.to_host(run(d, out, queue))  # reused buffers must be re-zeroed by the variant
        np.testing.assert_array_equal(got, want, err_msg=f"{kind}/{name}")
    np.testing.assert_array_equal(dev.to_host(histogram.bincount(d)), want)


@pytest.mark.parametrize("n", [1, 3, 4, 1023, 4097])
def test_tiny_inputs(dev, n):
    data = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
    d = histogram.upload(dev, data)
    for name, run in histogram.variants().items():
        np.testing.assert_array_equal(dev.to_host(run(d)), np.bincount(data, minlength=256), err_msg=name)


def test_bad_input_is_refused(dev):
    with pytest.raises(ValueError, match="uint8"):
        histogram.upload(dev, np.zeros(10, np.int32))
    with pytest.raises(ValueError, match="unknown histogram algorithm"):
        histogram.histogram(histogram.upload(dev, np.zeros(8, np.uint8)), "radix", False)


@pytest.mark.parametrize("kind", ["uniform", "constant", "normal"])
@pytest.mark.parametrize("sample", [100, 10_000])
def test_subsample_features(dev, kind, sample):
    data = inputs.histogram_data(kind, 200_000, seed=9)
    got = features.histogram_features(histogram.upload(dev, data), sample=sample)
    want = features.histogram_features_reference(data, sample=sample)
    assert got["n"] == want["n"] and got["n_per_bin"] == want["n_per_bin"]
    assert got["subsample_sd"] == pytest.approx(want["subsample_sd"], rel=1e-3, abs=1e-3)
    assert got["subsample_mode_share"] == pytest.approx(want["subsample_mode_share"])
