"""Shared machinery of the model-based strategies: targets, acquisition, candidate pools, refits.

The objective is modelled as log(time): run times span orders of magnitude and their ratios, not
differences, matter. Failures get a penalty a little worse than the worst success, so the model learns
to steer away from failing regions instead of ignoring them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptune.search.base import Strategy
from adaptune.search.neighbourhood import neighbours

FAILURE_PENALTY = 0.5  # in log units above the worst success (x1.65 slower)


def log_targets(values: np.ndarray) -> np.ndarray:
    """log(values) with failures (inf) replaced by a penalty just worse than the worst success."""
    y = np.full(values.shape, np.nan)
    ok = np.isfinite(values) & (values > 0)
    y[ok] = np.log(values[ok])
    worst = y[ok].max() if ok.any() else 0.0
    y[~ok] = worst + FAILURE_PENALTY
    return y


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """EI for minimisation; with sigma = 0 it falls back to the plain improvement."""
    from scipy.special import ndtr  # imported here: SciPy's import is for the model-based strategies alone

    sigma = np.maximum(sigma, 1e-12)
    z = (best - mu - xi) / sigma
    return (best - mu - xi) * ndtr(z) + sigma * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)  # Phi(z), phi(z)


LIARS = (None, "min", "mean", "max")


def with_lies(history: Any, idx: np.ndarray, y: np.ndarray, liar: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Constant liar for batch asks (Ginsbourger, Le Riche & Carraro 2010): the configurations asked but not
    told yet (being measured on other workers) join the training set with one made-up target, ``min``
    (the best so far: the model believes they are already good, so expected improvement near them vanishes
    and the next ask goes elsewhere), ``mean`` or ``max``; None adds nothing."""
    if liar is None:
        return idx, y
    if liar not in LIARS:
        raise ValueError(f"liar must be one of {LIARS}, got {liar!r}")
    pending = np.flatnonzero(history.asked & np.isnan(history.values))
    if not len(pending) or not len(y):
        return idx, y
    lie = {"min": np.min, "mean": np.mean, "max": np.max}[liar](y)
    return np.concatenate([idx, pending]), np.concatenate([y, np.full(len(pending), lie)])


def informative_columns(x: np.ndarray) -> np.ndarray:
    """Columns that vary over the space (constant parameters carry no information)."""
    return np.flatnonzero(x.max(axis=0) > x.min(axis=0))


class SurrogateStrategy(Strategy):
    """Random initial design, then the unasked candidate with the best acquisition value.

    Subclasses implement ``_fit(x, y)`` and ``_predict(x) -> (mu, sigma)``. The candidate pool is all
    unasked configurations when there are few, else a random subset plus every unasked neighbour of the
    best configurations found so far (where the optimum usually is); this bounds the cost of an ask.
    """

    options: dict[str, Any] = {"n_initial": 20, "pool_size": 2000, "refit_every": 1, "xi": 0.0,
                               "local_top": 5, "liar": None}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        if self.opts["liar"] not in LIARS:
            raise ValueError(f"liar must be one of {LIARS}, got {self.opts['liar']!r}")
        x = np.asarray(space.encode(), dtype=float)
        self._x = x[:, informative_columns(x)] if x.shape[1] else x
        self._fitted_at = -1
        self._ranked: list[int] = []

    def _propose(self) -> int | None:
        h = self.history
        n_told = len(h.told)
        if n_told < min(self.opts["n_initial"], self.n) or self._x.shape[1] == 0:
            return self._random_unasked()
        if self._fitted_at < 0 or n_told - self._fitted_at >= self.opts["refit_every"] or not self._ranked:
            idx, values = h.told_arrays()
            y = log_targets(values)
            fit_idx, fit_y = with_lies(h, idx, y, self.opts["liar"])
            self._fit(self._x[fit_idx], fit_y)
            self._fitted_at = n_told
            pool = self._pool()
            if len(pool) == 0:
                return None
            mu, sigma = self._predict(self._x[pool])
            best = float(np.min(y))
            acq = expected_improvement(mu, sigma, best, self.opts["xi"])
            order = np.lexsort((mu, -acq))  # ties (EI = 0 far from data) broken by the mean
            self._ranked = [int(i) for i in pool[order[:64]]][::-1]
        while self._ranked:
            i = self._ranked.pop()
            if not h.asked[i]:
                return i
        return self._random_unasked()

    def _pool(self) -> np.ndarray:
        h = self.history
        unasked = np.flatnonzero(~h.asked)
        size = self.opts["pool_size"]
        if len(unasked) <= size:
            return unasked
        pool = self.rng.choice(unasked, size=size, replace=False)
        idx, values = h.told_arrays()
        top = idx[np.argsort(values, kind="stable")[: self.opts["local_top"]]]
        near = [neighbours(self.table, int(t), "adjacent") for t in top]
        near = np.concatenate(near) if near else np.empty(0, dtype=np.int64)
        near = near[~h.asked[near]]
        return np.unique(np.concatenate([pool, near]))

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError
