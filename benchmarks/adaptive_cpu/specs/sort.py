"""SPEC: sorting, whose best implementation depends on size, key type, presortedness and key range.

Variants: NumPy's introsort (SIMD quicksort for 32/64-bit keys), NumPy's stable sort (timsort: linear
on sorted, reversed and run-structured keys) and a counting sort written here (linear in n + key
range; integer keys with a small range only). Features read a strided sample of 1024 keys.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from adaptune.adaptive import CodeVariant

SCALE = os.environ.get("ADAPTUNE_BENCH_SCALE", "full")  # "fast": small inputs for CI
SAMPLE = 1024

variant = CodeVariant("sort")


@variant.variant(default=True)
def quicksort(keys: np.ndarray) -> np.ndarray:
    return np.sort(keys, kind="quicksort")


@variant.variant
def timsort(keys: np.ndarray) -> np.ndarray:
    return np.sort(keys, kind="stable")


@variant.variant
def counting(keys: np.ndarray) -> np.ndarray:
    lo = keys.min()
    counts = np.bincount((keys - lo).astype(np.intp))
    return np.repeat(np.arange(lo, lo + len(counts), dtype=keys.dtype), counts)


@variant.constraint(counting)
def small_integer_range(keys: np.ndarray) -> bool:
    """Counting sort needs integer keys and a count array no larger than the input (memory)."""
    return keys.dtype.kind in "iu" and int(keys.max()) - int(keys.min()) <= max(keys.size, 1 << 16)


def _sample(keys: np.ndarray) -> np.ndarray:
    return keys[:: max(1, keys.size // SAMPLE)]


@variant.feature
def log_n(keys: np.ndarray) -> float:
    return float(np.log10(max(keys.size, 1)))


@variant.feature
def key_bits(keys: np.ndarray) -> float:
    return keys.dtype.itemsize * 8 + (0 if keys.dtype.kind in "iu" else 100)


@variant.feature
def ascending(keys: np.ndarray) -> float:
    s = _sample(keys)
    return float(np.count_nonzero(s[1:] >= s[:-1])) / max(1, s.size - 1)


@variant.feature
def descending(keys: np.ndarray) -> float:
    s = _sample(keys)
    return float(np.count_nonzero(s[1:] <= s[:-1])) / max(1, s.size - 1)


@variant.feature
def distinct_fraction(keys: np.ndarray) -> float:
    """Distinct keys among 128 sampled keys, per sampled key: near 0 for few-unique keys, near 1
    otherwise (128, not 1024: np.unique sorts its sample, which must stay cheap beside the sort)."""
    s = keys[:: max(1, keys.size // 128)]
    return float(np.unique(s).size) / max(1, s.size)


@variant.feature
def log_range_per_key(keys: np.ndarray) -> float:
    """log2 of the sampled key range per key: small when counting sort's array fits."""
    s = _sample(keys).astype(np.float64)
    return float(np.log2(1.0 + (s.max() - s.min()) / keys.size))


DISTRIBUTIONS = ("uniform", "sorted", "reversed", "almost_sorted", "few_unique", "small_range")
DTYPES = ("int32", "int64", "float32", "float64")


def make_keys(seed: int, stratum: int | None = None) -> tuple[str, object]:
    """Random keys; with ``stratum`` (training) it is row ``stratum`` of a Latin
    hypercube design over the same ranges (see :func:`_design`)."""
    rng = np.random.default_rng(seed)
    lo, hi = (3, 4.5) if SCALE == "fast" else (3, 7)
    if stratum is None:
        n = int(10 ** rng.uniform(lo, hi))
        dist = DISTRIBUTIONS[int(rng.integers(len(DISTRIBUTIONS)))]
        dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    else:
        p = _design()[stratum]
        n = int(10 ** (lo + (hi - lo) * p[0]))
        dist = DISTRIBUTIONS[int(p[1] * len(DISTRIBUTIONS))]
        dtype = DTYPES[int(p[2] * len(DTYPES))]
    name = f"{dist}-{dtype}-{n}-s{seed}"

    def make() -> tuple[np.ndarray]:
        g = np.random.default_rng(seed)
        if dist == "few_unique":
            keys = g.integers(0, 2 ** 30, 16)[g.integers(0, 16, n)]
        elif dist == "small_range":
            keys = g.integers(0, max(2, n // 4), n)
        else:
            keys = g.integers(0, 2 ** 30, n) if dtype.startswith("int") else g.random(n) * 2 ** 30
        keys = keys.astype(dtype)
        if dist in ("sorted", "almost_sorted", "reversed"):
            keys.sort()
        if dist == "reversed":
            keys = keys[::-1].copy()
        if dist == "almost_sorted":  # 1% of keys swapped with random partners
            i, j = g.integers(0, n, (2, max(1, n // 100)))
            keys[i], keys[j] = keys[j], keys[i]
        return (keys,)

    return name, make


N_TRAIN, N_TEST = (50, 200) if SCALE == "full" else (5, 20)  # training set: 25 % of the test set


@functools.cache
def _design() -> np.ndarray:
    """Training inputs as a Latin hypercube (one stratum per input in every dimension, dimensions
    uncorrelated), so that few inputs still cover every combination's neighbourhood."""
    from scipy.stats import qmc

    return qmc.LatinHypercube(d=3, seed=2026).random(N_TRAIN)


def training_inputs() -> list:
    return [make_keys(seed, stratum=seed) for seed in range(N_TRAIN)]


def test_inputs() -> list:
    return [make_keys(seed) for seed in range(1000, 1000 + N_TEST)]
