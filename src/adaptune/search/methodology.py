"""The comparison methodology of Willemsen, van Nieuwpoort and van Werkhoven (FGCS 2024).

A strategy's mean best-so-far curve is standardised against the *calculated* curve of random search
without replacement on the same recorded space: 0 = as good as random search, 1 = the optimum from the
first evaluation, negative = worse than random. The score is the mean of the standardised curve over a
budget window of evaluations, then the mean over search spaces.

Two baselines are offered. ``"paper"`` (the default, ``package_baseline``) is the one of the paper and
of the ``autotuning-methodology`` package: the value at the expected rank of the best of M draws among
the valid configurations. ``"exact"`` (``random_baseline``) is the exact expected best value of M draws
without replacement from the whole recorded space, failures included as draws (they cost an evaluation,
as in Kernel Tuner); it is larger early on, because the mean feels the long tail of slow configurations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import gammaln


def _log_comb(n: np.ndarray | float, k: np.ndarray | float) -> np.ndarray:
    return gammaln(np.asarray(n) + 1) - gammaln(np.asarray(k) + 1) - gammaln(np.asarray(n) - np.asarray(k) + 1)


def random_baseline(values: np.ndarray, evals: Sequence[int] | np.ndarray) -> np.ndarray:
    """Expected best value after M evaluations of random search without replacement, for each M in evals.

    ``values``: objective of every configuration in the space (inf = failure). With k-th best valid value
    v_k, P(best of M = v_k) = C(N-k, M-1) / C(N, M). When all M draws fail (possible only while
    M <= number of failures) the worst valid value stands in, the same stand-in strategy curves use.
    """
    values = np.asarray(values, dtype=float)
    ok = np.sort(values[np.isfinite(values)])
    n, n_valid = len(values), len(ok)
    if n_valid == 0:
        raise ValueError("random_baseline: the space has no valid value")
    n_fail = n - n_valid
    k = np.arange(1, n_valid + 1)
    out = np.empty(len(evals))
    for j, m in enumerate(np.asarray(evals, dtype=int)):
        if m < 1:
            raise ValueError(f"random_baseline: evaluations must be >= 1, got {m}")
        m = min(m, n)
        log_p = _log_comb(n - k, m - 1) - _log_comb(n, m)
        p = np.where(n - k >= m - 1, np.exp(np.where(n - k >= m - 1, log_p, 0.0)), 0.0)
        p_all_fail = math.exp(_log_comb(n_fail, m) - _log_comb(n, m)) if m <= n_fail else 0.0
        out[j] = float(p @ ok) + p_all_fail * ok[-1]
    return out


def package_baseline(values: np.ndarray, evals: Sequence[int] | np.ndarray) -> np.ndarray:
    """The baseline as ``autotuning_methodology.RandomSearchCalculatedBaseline`` computes it (no smoothing).

    Valid values only, sorted worst first; the value at index round(M (N+1) / (M+1)) (the expected rank
    of the best of M draws), capped at N-1.
    """
    values = np.asarray(values, dtype=float)
    desc = np.sort(values[np.isfinite(values)])[::-1]
    n = len(desc)
    idx = [min(n - 1, round(m * (n + 1) / (m + 1))) for m in np.asarray(evals, dtype=int)]
    return desc[idx]


def best_so_far_curve(trace_values: np.ndarray, length: int, failure_value: float) -> np.ndarray:
    """Best-so-far after 1..length evaluations; a trace that stopped early (space exhausted) keeps its
    last best, and evaluations before the first success count as ``failure_value``."""
    v = np.asarray(trace_values, dtype=float)[:length]
    v = np.where(np.isfinite(v), v, failure_value)
    if len(v) == 0:
        return np.full(length, failure_value)
    best = np.minimum.accumulate(v)
    if len(best) < length:
        best = np.concatenate([best, np.full(length - len(best), best[-1])])
    return best


def standardise(curve: np.ndarray, baseline: np.ndarray, optimum: float) -> np.ndarray:
    """(baseline - curve) / (baseline - optimum): 0 = random search, 1 = optimum (minimisation)."""
    division = np.asarray(baseline) - optimum
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (np.asarray(baseline) - np.asarray(curve)) / division
    # where random search is already at the optimum, any strategy at the optimum is "as good": 1
    return np.where(division > 0, s, np.where(np.asarray(curve) <= optimum, 1.0, 0.0))


def cutoff_evals(values: np.ndarray, percentile: float) -> int:
    """Evaluations random search needs, on expectation, to get ``percentile`` of the way from the median
    to the optimum (the package's budget-window bound, eq. 6 of the paper)."""
    ok = np.sort(np.asarray(values, dtype=float)[np.isfinite(values)])
    n = len(ok)
    target = ok[0] + (np.median(ok) - ok[0]) * (1.0 - percentile)
    desc = ok[::-1]
    i = int(np.argmax(desc <= target))
    return max(1, math.ceil(i / (n + 1 - i)))


BASELINES = ("paper", "exact")


def baseline_curve(values: np.ndarray, evals: np.ndarray, kind: str = "paper") -> np.ndarray:
    """The random-search baseline of the given kind (see the module docstring)."""
    if kind == "paper":
        return package_baseline(values, evals)
    if kind == "exact":
        return random_baseline(values, evals)
    raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(BASELINES)}")


def score(traces: Sequence[np.ndarray], values: np.ndarray, window: tuple[int, int],
          baseline: str = "paper") -> float:
    """Methodology score of one strategy on one space: the mean standardised mean best-so-far curve
    over evaluations window[0]..window[1] (inclusive)."""
    lo, hi = window
    if not 1 <= lo <= hi:
        raise ValueError(f"score: bad evaluation window {window}")
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    optimum, worst = float(finite.min()), float(finite.max())
    curves = np.stack([best_so_far_curve(t, hi, worst) for t in traces])
    mean_curve = curves.mean(axis=0)[lo - 1:hi]
    evals = np.arange(lo, hi + 1)
    return float(np.mean(standardise(mean_curve, baseline_curve(values, evals, baseline), optimum)))


def aggregate(scores: Sequence[float]) -> float:
    """Mean over search spaces (the paper's aggregate)."""
    return float(np.mean(scores)) if len(scores) else math.nan
