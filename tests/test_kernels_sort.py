"""Merge, bitonic and presorted-aware sorts (dialect source) on PoCL against numpy.sort, all key types."""

import numpy as np
import pytest

from adaptune.kernels import features, inputs, sort
from adaptune.kernels.device import OpenCLDevice


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


@pytest.mark.parametrize("dtype", inputs.SORT_DTYPES)
@pytest.mark.parametrize("order", inputs.SORT_ORDERS)
def test_own_sorts_match_numpy(dev, dtype, order):
    keys = inputs.sort_keys(order, 3001, dtype, seed=7)
    want = np.sort(keys)
    d = dev.asarray(keys)
    for name in ("merge", "bitonic", "presorted_radix", "locality"):
        got = dev.to_host(sort.variants(with_torch=False)[name](dev, d))
        np.testing.assert_array_equal(got, want, err_msg=f"{order}/{dtype}/{name}")
    np.testing.assert_array_equal(dev.to_host(d), keys)  # the input is left as it was


@pytest.mark.parametrize("n", [1, 2, 511, 512, 513, 5000])
def test_sizes_around_tiles_and_infinities(dev, n):
    keys = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    keys[:: max(1, n // 3)] = np.inf
    for name in ("merge", "bitonic", "locality"):
        got = dev.to_host(sort.variants(with_torch=False)[name](dev, dev.asarray(keys)))
        np.testing.assert_array_equal(got, np.sort(keys), err_msg=f"{n}/{name}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_keys_sort_last_like_numpy(dev, dtype):
    keys = inputs.sort_keys("with_nans", 5003, dtype, seed=2)
    keys[:3] = [np.nan, np.inf, -np.inf]
    assert np.isnan(keys).sum() > 10
    want = np.sort(keys)
    for name, run in sort.variants(with_torch=False).items():
        got = dev.to_host(run(dev, dev.asarray(keys)))
        np.testing.assert_array_equal(got, want, err_msg=name)  # NaN positions must match too
    ordered = np.sort(keys)
    assert sort.count_order(dev, dev.asarray(ordered))[0] == 0  # NaNs at the end: no descent
    got = dev.to_host(sort.presorted_sort(dev, dev.asarray(ordered)))
    np.testing.assert_array_equal(got, ordered)


def test_locality_sort_on_runs_in_and_out_of_order(dev):
    # sorted blocks whose pairs are partly in order already: the copy path and the merge path both run
    rng = np.random.default_rng(4)
    blocks = [np.sort(rng.integers(0, 10**6, 512)) + (10**6 * (i % 3)) for i in range(9)]
    keys = np.concatenate(blocks).astype(np.int64)
    got = dev.to_host(sort.locality_sort(dev, dev.asarray(keys)))
    np.testing.assert_array_equal(got, np.sort(keys))


def test_count_order_exact(dev):
    keys = np.array([1, 3, 3, 2, 5, 4, 4, 9], dtype=np.int64)
    np.testing.assert_array_equal(sort.count_order(dev, dev.asarray(keys)), [2, 3, 2])


@pytest.mark.parametrize("order", ["uniform", "reversed", "almost_sorted", "few_unique"])
def test_sampled_features(dev, order):
    keys = inputs.sort_keys(order, 100_000, "int64", seed=1)
    got = features.sort_features(dev, dev.asarray(keys), sample_pairs=2000)
    want = features.sort_features_reference(keys, sample_pairs=2000)
    assert got == pytest.approx(want)
    assert want["key_bits"] == 64
    if order == "reversed":
        assert want["descent_share"] == 1.0


def test_almost_sorted_swaps_a_fifth_to_a_quarter():
    keys = inputs.sort_keys("almost_sorted", 40_000, "int32", seed=3)
    moved = np.mean(keys != np.sort(keys))
    assert 0.17 <= moved <= 0.25


def test_bad_dtype_is_refused(dev):
    with pytest.raises(ValueError, match="int32, int64"):
        sort.merge_sort(dev, dev.asarray(np.zeros(4, np.uint16)))
