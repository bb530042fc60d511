"""Features a first call can afford: statistics of a few hundred values read when the input is fixed.

Why: BFS's host metadata (vertices, edges, their ratio) do not tell a hub-and-spoke graph from a mesh of the same
size, and its device features (a launch over every row, a probe) land ~0.8 ms after ``fix`` on an H100, after a
median run. The degrees of ``BFS_SAMPLE_ROWS`` rows drawn at fixed random positions (one gather of twice as many
words of the CSR row pointer, one copy: microseconds to tens of microseconds) separate the skewed graphs from the
even ones, which is what picks between sweeping edges and a top-down queue. The rows are drawn with a fixed seed
(``sample_rows``), so a graph always gives the same features and a rule fitted offline on regenerated inputs reads
what the live call reads. Sort: the order of ``SORT_SAMPLE_PAIRS`` strided adjacent key pairs (the device features'
own kernel over 4x fewer pairs, waited for at ``fix``), where the device features' 4096 pairs land after a median
run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptune.kernels import features

BFS_SAMPLE_FEATURES = ("sample_degree_sd", "sample_degree_cv", "sample_max_over_avg")
BFS_SAMPLE_ROWS = 256  # chosen by training CV among 64 / 256 / 1024 (benchmarks/gpu_suite/sampled_features.py)
SAMPLE_SEED = 0


def sample_rows(n: int, rows: int = BFS_SAMPLE_ROWS) -> np.ndarray:
    """The sampled row indices of a graph of ``n`` vertices (with replacement; the same for every graph of n)."""
    return np.random.default_rng(SAMPLE_SEED).integers(0, n, rows)


def degree_sample_features(starts: np.ndarray, ends: np.ndarray, n: int, m: int) -> dict[str, float]:
    """The sampled rows' degree spread from their row-pointer entries (``indptr[rows]``, ``indptr[rows + 1]``):
    standard deviation, the same over the graph's average degree, and the largest over the average."""
    degrees = np.asarray(ends, np.float64) - np.asarray(starts, np.float64)
    avg = m / n
    sd = float(degrees.std())
    return {"sample_degree_sd": sd, "sample_degree_cv": sd / avg if avg else 0.0,
            "sample_max_over_avg": float(degrees.max()) / avg if avg else 0.0}


def bfs_sample_features(g: Any, rows: int = BFS_SAMPLE_ROWS) -> dict[str, float]:
    """``degree_sample_features`` of a DeviceGraph: the row pointer gathered at the sampled rows on its device
    (CuPy or PyOpenCL) and copied back (a sync: call it when the graph is fixed, not on the first call)."""
    idx = sample_rows(g.n, rows)
    both = np.concatenate([idx, idx + 1]).astype(np.int32)
    dev = g.device
    if dev.xp is np:  # PyOpenCL arrays
        import pyopencl.array as cla

        words = cla.take(g.indptr, dev.asarray(both)).get()
    else:
        words = dev.to_host(g.indptr[dev.asarray(both)])
    return degree_sample_features(words[:rows], words[rows:], g.n, g.m)


SORT_SAMPLE_FEATURES = ("sample_ascending_runs", "sample_descent_share", "sample_tie_share")
SORT_SAMPLE_PAIRS = 1024  # by training CV among 64 / 256 / 1024, a tie to the largest (benchmarks/gpu_suite/...)


def sort_sample_features(dev: Any, keys: Any, pairs: int = SORT_SAMPLE_PAIRS) -> dict[str, float]:
    """``features.sort_features`` over ``pairs`` strided adjacent pairs (a launch, a copy: a sync), as
    ``SORT_SAMPLE_FEATURES``."""
    return _sort_sample(features.sort_features(dev, keys, pairs))


def sort_sample_reference(keys: np.ndarray, pairs: int = SORT_SAMPLE_PAIRS) -> dict[str, float]:
    """The same on the host (``features.sort_features_reference``): offline, and the tests' reference."""
    return _sort_sample(features.sort_features_reference(keys, pairs))


def _sort_sample(f: dict[str, float]) -> dict[str, float]:
    return {name: f[name.removeprefix("sample_")] for name in SORT_SAMPLE_FEATURES}


SAMPLED: dict[str, tuple[tuple[str, ...], Any]] = {
    "bfs": (BFS_SAMPLE_FEATURES, lambda dev, g: bfs_sample_features(g)),
    "sort": (SORT_SAMPLE_FEATURES, sort_sample_features)}
"""Per benchmark: the sampled features' names and what computes them from the call's (device, object)."""
