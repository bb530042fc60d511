"""The LS-CAT thesis's score (seed 004, §4.6-4.7) and the baselines it is compared against.

For each (kernel, matrix size) sample the relative performance of block shape b is
``perf[b] = min_time / time[b]`` (1.0 for the best shape). A chooser's score is the mean over samples of
``perf[chosen]``: 1.0 for an oracle. A chosen shape that failed to run scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adaptune.predict.corpus import SHAPE_1024, SHAPES


def relative_performance(times: np.ndarray) -> np.ndarray:
    """``min/time`` per row of a (samples, shapes) time matrix; NaN (failed) -> 0."""
    t = np.asarray(times, dtype=float)
    best = np.nanmin(t, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        perf = best / t
    return np.nan_to_num(perf, nan=0.0)


def score(perf: np.ndarray, choice: Sequence[int] | np.ndarray) -> float:
    """The seed's metric: mean over samples of the chosen shape's relative performance."""
    perf = np.asarray(perf, dtype=float)
    choice = np.asarray(choice, dtype=int)
    if perf.ndim != 2 or choice.shape != (perf.shape[0],):
        raise ValueError(f"perf must be (samples, shapes) and choice (samples,), got {perf.shape}, {choice.shape}")
    return float(perf[np.arange(len(choice)), choice].mean())


def geomean_ratio(perf: np.ndarray, choice: Sequence[int] | np.ndarray) -> float:
    """Geometric mean of best/chosen time over samples (0 if any chosen shape failed)."""
    p = np.asarray(perf, dtype=float)[np.arange(len(choice)), np.asarray(choice, dtype=int)]
    if (p <= 0).any():
        return 0.0
    return float(np.exp(np.log(p).mean()))


def random_score(perf: np.ndarray) -> float:
    """Expected score of a uniformly random shape (the thesis's 'random choice', taken exactly)."""
    return float(np.asarray(perf, dtype=float).mean())


def always(perf: np.ndarray, shape_index: int = SHAPE_1024) -> np.ndarray:
    """Choices of a fixed shape for every sample."""
    return np.full(len(perf), shape_index, dtype=int)


def most_common_best(train_perf: np.ndarray) -> int:
    """The shape that is best most often in the training samples."""
    counts = np.bincount(np.argmax(train_perf, axis=1), minlength=train_perf.shape[1])
    return int(np.argmax(counts))


def shape_for_block_size(threads: int | None) -> int:
    """Index of the 1-D LS-CAT shape nearest below a suggested block size (occupancy API); 1024 if None."""
    if not threads or threads <= 0:
        return SHAPE_1024
    n = max(64, min(1024, int(threads) // 64 * 64))
    return SHAPES.index((n, 1))
