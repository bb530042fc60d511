"""SPEC: integer histogram (counts of keys in [0, bins)), whose best method depends on n, bins and order.

Variants: ``np.bincount`` (one pass, count array of size bins), ``np.add.at`` into a zeroed array
(unbuffered scatter), a sort-based count written here (sort, then binary-search the bin edges:
cheap when keys arrive sorted and bins are few), and ``np.histogram`` (NumPy's general binning).
Features: n, bins, n/bins and a sampled sortedness, as Nitro's histogram (N, N/#bins, sampled spread).
"""

from __future__ import annotations

import functools
import os

import numpy as np

from adaptune.adaptive import CodeVariant

SCALE = os.environ.get("ADAPTUNE_BENCH_SCALE", "full")

variant = CodeVariant("histogram")


@variant.variant(default=True)
def bincount(keys: np.ndarray, bins: int) -> np.ndarray:
    return np.bincount(keys, minlength=bins)


@variant.variant
def scatter_add(keys: np.ndarray, bins: int) -> np.ndarray:
    counts = np.zeros(bins, np.int64)
    np.add.at(counts, keys, 1)
    return counts


@variant.variant
def sort_search(keys: np.ndarray, bins: int) -> np.ndarray:
    ordered = keys if _looks_sorted(keys) and bool(np.all(keys[1:] >= keys[:-1])) else np.sort(keys)
    return np.diff(np.searchsorted(ordered, np.arange(bins + 1)))


@variant.variant
def numpy_histogram(keys: np.ndarray, bins: int) -> np.ndarray:
    return np.histogram(keys, bins=bins, range=(0, bins))[0]


def _looks_sorted(keys: np.ndarray) -> bool:
    s = keys[:: max(1, keys.size // 64)]
    return bool(np.all(s[1:] >= s[:-1]))


@variant.feature
def log_n(keys: np.ndarray, bins: int) -> float:
    return float(np.log10(max(keys.size, 1)))


@variant.feature
def log_bins(keys: np.ndarray, bins: int) -> float:
    return float(np.log10(bins))


@variant.feature
def log_keys_per_bin(keys: np.ndarray, bins: int) -> float:
    return float(np.log10(max(keys.size, 1) / bins))


@variant.feature
def log_range_per_bin(keys: np.ndarray, bins: int) -> float:
    """Sampled key range over the bin count: small when keys cluster in a few bins."""
    s = keys[:: max(1, keys.size // 1024)]
    return float(np.log10((int(s.max()) - int(s.min()) + 1) / bins)) if s.size else 0.0


@variant.feature
def sampled_sortedness(keys: np.ndarray, bins: int) -> float:
    s = keys[:: max(1, keys.size // 1024)]
    return float(np.count_nonzero(s[1:] >= s[:-1])) / max(1, s.size - 1)


DISTRIBUTIONS = ("uniform", "skewed", "sorted", "clustered")


def make_histogram_input(seed: int, stratum: int | None = None) -> tuple[str, object]:
    """Random keys and bin count; with ``stratum`` (training) it is row ``stratum`` of a Latin
    hypercube design over the same ranges (see :func:`_design`)."""
    rng = np.random.default_rng(seed)
    lo, hi = (3, 4.5) if SCALE == "fast" else (3, 7)
    if stratum is None:
        n = int(10 ** rng.uniform(lo, hi))
        bins = int(2 ** rng.integers(2, 23))
        dist = DISTRIBUTIONS[int(rng.integers(len(DISTRIBUTIONS)))]
    else:
        p = _design()[stratum]
        n = int(10 ** (lo + (hi - lo) * p[0]))
        bins = int(2 ** (2 + int(21 * p[1])))
        dist = DISTRIBUTIONS[int(p[2] * len(DISTRIBUTIONS))]
    name = f"{dist}-{n}-b{bins}-s{seed}"

    def make() -> tuple[np.ndarray, int]:
        g = np.random.default_rng(seed)
        if dist == "skewed":
            keys = np.minimum(bins - 1, g.zipf(1.5, n) - 1)
        elif dist == "clustered":
            keys = (g.integers(0, bins, 1) + g.integers(0, max(1, bins // 64), n)) % bins
        else:
            keys = g.integers(0, bins, n)
        if dist == "sorted":
            keys.sort()
        return keys.astype(np.int64), bins

    return name, make


N_TRAIN, N_TEST = (50, 200) if SCALE == "full" else (5, 20)  # training set: 25 % of the test set


@functools.cache
def _design() -> np.ndarray:
    """Training inputs as a Latin hypercube (one stratum per input in every dimension, dimensions
    uncorrelated), so that few inputs still cover every combination's neighbourhood."""
    from scipy.stats import qmc

    return qmc.LatinHypercube(d=3, seed=2026).random(N_TRAIN)


def training_inputs() -> list:
    return [make_histogram_input(seed, stratum=seed) for seed in range(N_TRAIN)]


def test_inputs() -> list:
    return [make_histogram_input(seed) for seed in range(3000, 3000 + N_TEST)]
