"""Two more models of configuration quality for an unseen device, and a sources-only ceiling.

Both models learn from the source devices only (configuration features ∘ device features), like
``zero_shot.BoostedTransfer``, and plug into ``zero_shot.nested_select`` as methods:

- ``GPTransfer``: Gaussian-process regression (scikit-learn, ARD RBF + white noise, hyperparameters by
  marginal likelihood on the sources) of clipped relative log time. An exact GP does not scale to every
  configuration of every source, so each source contributes its best ``per_source * top_share``
  configurations (the region that decides the choice) and a seeded random rest.
- ``PairwiseRank``: a RankSVM-style linear model (logistic loss on feature differences of configuration
  pairs from the same source). Features: one-hot parameter values, their pairwise products, and the
  one-hots times each standardised device feature, so the ranking can change with the device. Only the
  order within a device is learned, not how much slower anything is.

``ceiling`` answers "could any sources-only rule reach x on this target?": the best target fraction among
the configurations that are at least ``x`` of the optimum on every source, and among the configurations
on the Pareto front of the sources' fractions (what any monotone aggregation of the sources can pick).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import sparse
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import LogisticRegression

from adaptune.adaptive.device_features import device_vector
from adaptune.adaptive.transfer import DeviceSpace, fractions, relative_log


def _device_rows(sources: Sequence[DeviceSpace], names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sources' device vectors standardised by the sources' own mean and spread (the target is not seen)."""
    d = np.array([device_vector(s.features, names) for s in sources], dtype=float).reshape(len(sources), len(names))
    mu = d.mean(0)
    sd = np.where(d.std(0) > 0, d.std(0), 1.0)
    return (d - mu) / sd, mu, sd


class GPTransfer:
    """GP regression on [configuration features scaled to 0..1 ∘ standardised device features]."""

    def __init__(self, device_features: Sequence[str] = (), *, cap: float = 3.0, per_source: int = 240,
                 top_share: float = 0.5, seed: int = 0, lcb: float = 0.0) -> None:
        if not 0 < top_share <= 1:
            raise ValueError(f"top_share must be in (0, 1], got {top_share}")
        self.device_features = tuple(device_features)
        self.cap, self.per_source, self.top_share, self.seed, self.lcb = cap, per_source, top_share, seed, lcb
        self._gp: GaussianProcessRegressor | None = None

    def _x(self, features: Mapping[str, float] | None) -> np.ndarray:
        assert self._xs is not None
        if not self.device_features:
            return self._xs
        if features is None:
            raise ValueError(f"this model uses device features {self.device_features}: pass the target's")
        d = (np.asarray(device_vector(features, self.device_features)) - self._mu) / self._sd
        return np.concatenate([self._xs, np.tile(d, (len(self._xs), 1))], axis=1)

    def fit(self, x_config: np.ndarray, sources: Sequence[DeviceSpace]) -> GPTransfer:
        if not sources:
            raise ValueError("GPTransfer needs at least one source device")
        x = np.asarray(x_config, dtype=float)
        lo, span = x.min(0), np.where(np.ptp(x, 0) > 0, np.ptp(x, 0), 1.0)
        self._xs = (x - lo) / span
        _, self._mu, self._sd = _device_rows(sources, self.device_features)
        rng = np.random.default_rng(self.seed)
        rows, ys = [], []
        for s in sources:
            if len(s.values) != len(x):
                raise ValueError(f"source {s.device!r} has {len(s.values)} values for {len(x)} configurations")
            y = np.minimum(relative_log(s.values), self.cap)
            n_top = min(len(y), int(round(self.per_source * self.top_share)))
            top = np.argsort(y, kind="stable")[:n_top]
            rest = np.setdiff1d(np.arange(len(y)), top)
            pick = np.concatenate([top, rng.choice(rest, min(len(rest), self.per_source - n_top), replace=False)])
            rows.append(self._x(s.features)[pick])
            ys.append(y[pick])
        xr = np.concatenate(rows)
        kernel = (ConstantKernel(1.0, (1e-2, 1e2)) * RBF(np.ones(xr.shape[1]), (1e-2, 1e2))
                  + WhiteKernel(0.1, (1e-4, 1.0)))
        self._gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=self.seed).fit(xr, np.concatenate(ys))
        return self

    def predict(self, features: Mapping[str, float] | None = None) -> np.ndarray:
        """Predicted relative log time per configuration (minus ``lcb`` standard deviations: optimism)."""
        if self._gp is None:
            raise RuntimeError("GPTransfer.predict before fit")
        if self.lcb:
            mean, sd = self._gp.predict(self._x(features), return_std=True)
            return mean - self.lcb * sd
        return self._gp.predict(self._x(features))


class PairwiseRank:
    """Linear pairwise ranking (logistic loss on φ(a) - φ(b)) over one-hot configuration features,
    their products and their products with the device features; score = -w·φ (lower = better)."""

    def __init__(self, device_features: Sequence[str] = (), *, pairs_per_source: int = 6000, top_share: float = 0.1,
                 c: float = 1.0, seed: int = 0) -> None:
        self.device_features = tuple(device_features)
        self.pairs, self.top_share, self.c, self.seed = pairs_per_source, top_share, c, seed
        self._w: np.ndarray | None = None

    def _onehot(self, x: np.ndarray) -> sparse.csr_matrix:
        cols = []
        for j in range(x.shape[1]):
            vals = np.unique(x[:, j])
            if 1 < len(vals) <= 32:
                cols += [(x[:, j] == v) for v in vals]
        m = np.unique(np.array(cols, dtype=np.int8), axis=0)  # the same indicator from two columns counts once
        return m.T

    def _phi(self, features: Mapping[str, float] | None) -> sparse.csr_matrix:
        assert self._oh is not None
        blocks = [sparse.csr_matrix(self._oh), self._pairs_oh]
        if self.device_features:
            if features is None:
                raise ValueError(f"this model uses device features {self.device_features}: pass the target's")
            d = (np.asarray(device_vector(features, self.device_features)) - self._mu) / self._sd
            blocks += [sparse.csr_matrix(self._oh * v) for v in d]
        return sparse.hstack(blocks, format="csr")

    def fit(self, x_config: np.ndarray, sources: Sequence[DeviceSpace]) -> PairwiseRank:
        if not sources:
            raise ValueError("PairwiseRank needs at least one source device")
        x = np.asarray(x_config, dtype=float)
        self._oh = self._onehot(x).astype(float)
        k = self._oh.shape[1]
        iu, ju = np.triu_indices(k, 1)
        prod = self._oh[:, iu] * self._oh[:, ju]
        keep = prod.any(0) & ~prod.all(0)
        self._pairs_oh = sparse.csr_matrix(prod[:, keep])
        _, self._mu, self._sd = _device_rows(sources, self.device_features)
        rng = np.random.default_rng(self.seed)
        diffs, labels = [], []
        for s in sources:
            if len(s.values) != len(x):
                raise ValueError(f"source {s.device!r} has {len(s.values)} values for {len(x)} configurations")
            y = relative_log(s.values)
            order = np.argsort(y, kind="stable")
            top = order[:max(2, int(len(y) * self.top_share))]
            a = rng.choice(top, self.pairs)  # one side from the good region, the other anywhere (half of them
            b = np.where(rng.random(self.pairs) < 0.5, rng.choice(top, self.pairs), rng.integers(0, len(y), self.pairs))
            ok = y[a] != y[b]  # also from the good region): the order near the top is what the choice needs
            a, b = a[ok], b[ok]
            phi = self._phi(s.features)
            diffs.append(phi[a] - phi[b])
            labels.append((y[a] < y[b]).astype(int))
        xd, yd = sparse.vstack(diffs, format="csr"), np.concatenate(labels)
        flip = rng.random(len(yd)) < 0.5  # balanced classes: half the pairs the other way round
        xd = sparse.diags(np.where(flip, -1.0, 1.0)) @ xd
        yd = np.where(flip, 1 - yd, yd)
        model = LogisticRegression(C=self.c, fit_intercept=False, max_iter=2000, solver="liblinear")
        self._w = model.fit(xd, yd).coef_.ravel()
        return self

    def predict(self, features: Mapping[str, float] | None = None) -> np.ndarray:
        if self._w is None:
            raise RuntimeError("PairwiseRank.predict before fit")
        return -(self._phi(features) @ self._w)


def ceiling(target: DeviceSpace, sources: Sequence[DeviceSpace], thresholds: Sequence[float]) -> dict:
    """What the sources could justify on ``target``: per threshold x, the configurations at least x of the
    optimum on every source (count, best / median / worst target fraction among them); and the best target
    fraction on the Pareto front of the sources' fractions (any monotone aggregation picks from it)."""
    f = np.array([fractions(s.values) for s in sources])
    ft = fractions(target.values)
    worst = f.min(0)
    out: dict = {"threshold": {}}
    for x in thresholds:
        ok = worst >= x
        vals = ft[ok]
        out["threshold"][f"{x:.2f}"] = {"count": int(ok.sum()),
                                        "best": float(vals.max()) if ok.any() else None,
                                        "median": float(np.median(vals)) if ok.any() else None,
                                        "worst": float(vals.min()) if ok.any() else None}
    front = pareto_front(f.T)
    out["pareto_count"] = int(len(front))
    out["pareto_best"] = float(ft[front].max())
    out["pareto_median"] = float(np.median(ft[front]))
    return out


def pareto_front(points: np.ndarray) -> np.ndarray:
    """Indices of the rows not dominated by another row (higher = better in every column)."""
    p = np.asarray(points, dtype=float)
    order = np.argsort(-p.sum(1), kind="stable")
    front: list[int] = []
    for i in order:
        if not any((p[j] >= p[i]).all() and (p[j] > p[i]).any() for j in front):
            front.append(int(i))
    return np.array(sorted(front), dtype=int)
