"""``auto``: the recommended default (how it was chosen, with the numbers: docs/search.md).

Tree-ensemble Bayesian optimisation with greedy steps around the best configurations:

- a space-filling initial design (greedy farthest-point over the parameter positions);
- an extra-trees surrogate (SMAC style) of log time on the parameter positions plus, for integer
  parameters, log2 of the value, whether it is a power of two and its power-of-two alignment (GPU
  kernels are fast or slow by warp/wavefront multiples, which positions hide); its uncertainty the
  spread of the trees; targets above the median success are capped at the median, so the model spends
  its capacity on the good region instead of on the long tail of slow configurations, and failures
  (compile or launch errors, timeouts) count as that cap, so the search steers away from them;
- global asks: the unasked valid configuration with the highest expected improvement, over every
  unasked configuration (a random ``pool_size`` subset plus the neighbours of the best on huge spaces);
  every ``stratify_every``-th global ask looks only inside one *mode*, the modes in turn. A mode is one
  combination of the two-valued parameters (switches such as ``use_shmem`` or ``read_only``: each
  choice is a different code path with its own landscape, and the best one is often a needle that a
  model fitted mostly on another mode never ranks high);
- local asks (every ``local_every``-th): the unasked Hamming neighbour (one parameter changed) with the
  lowest predicted time, around the best configuration of each of the ``local_top`` best modes. Greedy
  descent over Hamming neighbours has few local minima within a mode, and the optimum sits next to
  runners-up the model smooths over; descending in several modes at once keeps one trapped mode from
  taking every local step.

Batch asks (several workers, docs/distributed.md): with ``liar="min"`` the configurations still being
measured join each refit with the best value so far as a made-up target (constant liar), so parallel asks
spread out instead of crowding one promising spot; the tuner sets it when a strategy has several workers.

The forest is refitted every ``refit_every`` tells and its predictions reused in between, which keeps
an ask at a few milliseconds on 10^4 configurations (measured in docs/search.md).
"""

from __future__ import annotations

import numpy as np

from adaptune.search.base import Strategy, register
from adaptune.search.neighbourhood import neighbours
from adaptune.search.surrogate import (
    FAILURE_PENALTY,
    LIARS,
    expected_improvement,
    informative_columns,
    with_lies,
)


def maximin_design(x: np.ndarray, n: int, rng: np.random.Generator, pool: int = 2000) -> list[int]:
    """``n`` distinct rows spread over the space: greedy farthest-point (L1) choice from a random pool."""
    cand = rng.choice(len(x), size=min(pool, len(x)), replace=False)
    chosen = [int(cand[0])]
    dist = np.abs(x[cand] - x[cand[0]]).sum(1)
    while len(chosen) < min(n, len(cand)):
        k = int(np.argmax(dist))
        chosen.append(int(cand[k]))
        dist = np.minimum(dist, np.abs(x[cand] - x[cand[k]]).sum(1))
    return chosen


def capped_log_targets(values: np.ndarray, cap_quantile: float) -> np.ndarray:
    """log(time); failures at the worst success + penalty; everything capped at a quantile of successes."""
    y = np.full(values.shape, np.nan)
    ok = np.isfinite(values) & (values > 0)
    y[ok] = np.log(values[ok])
    y[~ok] = (y[ok].max() if ok.any() else 0.0) + FAILURE_PENALTY
    if cap_quantile < 1.0 and ok.sum() >= 4:
        y = np.minimum(y, np.quantile(y[ok], cap_quantile))
    return y


def value_features(space) -> np.ndarray:  # type: ignore[no-untyped-def]
    """log2(value), is-a-power-of-two and log2 of the power-of-two alignment of every positive integer
    parameter with at least three values, one row per valid configuration."""
    t = np.asarray(space.table)
    cols = []
    for j, p in enumerate(space.params):
        vals = list(p.values)
        if len(vals) < 3 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                    and v > 0 for v in vals):
            continue
        v = np.asarray(vals, dtype=np.int64)[t[:, j]]
        cols += [np.log2(v), ((v & (v - 1)) == 0).astype(float), np.log2(v & -v)]
    return np.stack(cols, axis=1) if cols else np.zeros((len(t), 0))


def mode_labels(space) -> np.ndarray:  # type: ignore[no-untyped-def]
    """0..k-1: which combination of the two-valued parameters each valid configuration has."""
    t = np.asarray(space.table)
    switches = [j for j, p in enumerate(space.params) if len(p.values) == 2]
    if not switches or not len(t):
        return np.zeros(len(t), dtype=np.int64)
    return np.unique(t[:, switches], axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


@register
class Auto(Strategy):
    """The default: extra-trees EI over all unasked configurations, alternating with greedy local steps."""

    name = "auto"
    options = {"n_initial": 20, "n_trees": 32, "refit_every": 3, "cap_quantile": 0.5, "local_every": 2,
               "local_top": 3, "neighbourhood": "hamming", "pool_size": 20000, "xi": 0.0,
               "stratify_every": 2, "value_features": True, "liar": None}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        if self.opts["liar"] not in LIARS:
            raise ValueError(f"liar must be one of {LIARS}, got {self.opts['liar']!r}")
        t = np.asarray(space.table, dtype=float)
        cols = informative_columns(t) if t.shape[1] else np.zeros(0, dtype=np.int64)
        positions = t[:, cols]
        scale = positions.max(axis=0) if len(cols) else np.ones(0)
        n_init = min(int(self.opts["n_initial"]), self.n)
        self._design = maximin_design(positions / np.maximum(scale, 1), n_init, self.rng)[::-1] if (
            len(cols) and n_init) else []
        extra = value_features(space) if self.opts["value_features"] else np.zeros((self.n, 0))
        self._x = np.concatenate([positions, extra[:, informative_columns(extra)]], axis=1)
        self._x32 = self._x.astype(np.float32)  # what the fitted trees read
        self._mode = mode_labels(space)
        self._n_modes = int(self._mode.max()) + 1 if self.n else 0
        self._global_asks = 0
        self._fitted_at = -1
        self._cand = np.zeros(0, dtype=np.int64)   # candidates scored at the last refit
        self._mu = np.zeros(0)
        self._sd = np.zeros(0)
        self._best_y = np.inf
        self._steps = 0

    def _propose(self) -> int | None:
        h = self.history
        while self._design:
            i = self._design.pop()
            if not h.asked[i]:
                return i
        idx, values = h.told_arrays()
        if self._x.shape[1] == 0 or len(idx) < 2 or not np.isfinite(values).any():
            return self._random_unasked()
        if self._fitted_at < 0 or len(idx) - self._fitted_at >= self.opts["refit_every"]:
            self._refit(idx, values)
        self._steps += 1
        if self.opts["local_every"] and self._steps % self.opts["local_every"] == 0:
            j = self._local_step(idx, values)
            if j is not None:
                return j
        free = ~h.asked[self._cand]
        if not free.any():
            return self._random_unasked()
        free = self._stratify(free)
        mu, sd = self._mu[free], self._sd[free]
        ei = expected_improvement(mu, sd, self._best_y, self.opts["xi"])
        return int(self._cand[free][np.lexsort((mu, -ei))[0]])

    def _refit(self, idx: np.ndarray, values: np.ndarray) -> None:
        # imported here: scikit-learn's 1.5 s of import is for the model-based strategies alone
        from sklearn.ensemble import ExtraTreesRegressor

        y = capped_log_targets(values, self.opts["cap_quantile"])
        model = ExtraTreesRegressor(n_estimators=self.opts["n_trees"], max_features=0.8, n_jobs=1,
                                    random_state=int(self.rng.integers(2**31)))
        fit_idx, fit_y = with_lies(self.history, idx, y, self.opts["liar"])  # batch asks: constant liar
        model.fit(self._x[fit_idx], fit_y)
        unasked = np.flatnonzero(~self.history.asked)
        if len(unasked) > self.opts["pool_size"]:
            unasked = np.union1d(self.rng.choice(unasked, self.opts["pool_size"], replace=False),
                                 self._near_best(idx, values))
        # the trees' own arrays, not ``predict``: the same numbers without per-call input checks (1/3 faster)
        x = self._x32[unasked]
        per_tree = np.stack([tree.tree_.predict(x)[:, 0] for tree in model.estimators_])
        self._cand, self._mu, self._sd = unasked, per_tree.mean(0), per_tree.std(0)
        self._best_y = float(y.min())
        self._fitted_at = len(idx)

    def _stratify(self, free: np.ndarray) -> np.ndarray:
        """Every ``stratify_every``-th global ask: only the free candidates of the next mode that has any."""
        self._global_asks += 1
        every = self.opts["stratify_every"]
        if not every or self._n_modes < 2 or self._global_asks % every:
            return free
        start = self._global_asks // every
        for k in range(self._n_modes):
            in_mode = free & (self._mode[self._cand] == (start + k) % self._n_modes)
            if in_mode.any():
                return in_mode
        return free

    def _centres(self, idx: np.ndarray, values: np.ndarray) -> list[int]:
        """The best success of each of the ``local_top`` best modes, topped up with the next best successes."""
        ok = np.isfinite(values)
        ranked = [int(i) for i in idx[ok][np.argsort(values[ok], kind="stable")]]
        k = self.opts["local_top"]
        centres, modes = [], set()
        for i in ranked:
            if len(centres) < k and int(self._mode[i]) not in modes:
                modes.add(int(self._mode[i]))
                centres.append(i)
        return centres + [i for i in ranked if i not in centres][: k - len(centres)]

    def _near_best(self, idx: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Unasked neighbours of the local-search centres."""
        top = self._centres(idx, values)
        if not len(top):
            return np.zeros(0, dtype=np.int64)
        near = np.unique(np.concatenate([neighbours(self.table, int(t), self.opts["neighbourhood"])
                                         for t in top]))
        return near[~self.history.asked[near]]

    def _local_step(self, idx: np.ndarray, values: np.ndarray) -> int | None:
        """The unasked neighbour of the best configurations with the lowest predicted time."""
        near = self._near_best(idx, values)
        scored = np.isin(near, self._cand)
        near = near[scored]
        if not len(near):
            return None
        pred = self._mu[np.searchsorted(self._cand, near)]
        return int(near[int(np.argmin(pred))])
