"""Zero-shot configuration for an unseen device: stronger choices than the plain consensus, and an honest
way to pick among them.

Every *method* maps (configuration features, source devices, target's device features) to a score per
configuration, lower = better (a predicted relative log time or a rank): the target's measurements are
never an input. Methods here:

- robust aggregations of the sources' fractions of optimum: a low quantile (``quantile``), the worst case
  (``maximin``), the geometric mean (``geomean`` — the consensus), mean rank (``borda``);
- ``similarity``: the consensus with each source weighted by how close its device features are to the
  target's (exp(-distance / tau) on standardised log features);
- ``BoostedTransfer``: gradient-boosted trees on [configuration parameters ∘ device features] over the
  union of the sources (a model of configuration quality from both, clipped relative log time);
- ``ensemble``: the mean rank of several methods.

``nested_select`` chooses a method (or a hyperparameter) by leave-one-out over the *sources only*: each
source in turn is a temporary target, every candidate is trained on the others and scored on it; the
candidate with the best mean wins. The held-out target plays no part in the choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import rankdata
from sklearn.ensemble import HistGradientBoostingRegressor

from adaptune.adaptive.device_features import device_vector
from adaptune.adaptive.transfer import DeviceSpace, best_of, fractions, relative_log

Method = Callable[[np.ndarray, Sequence[DeviceSpace], Mapping[str, float]], np.ndarray]
"""(configuration features, sources, target device features) -> score per configuration, lower = better."""

FLOOR = 1e-3  # a failed configuration's fraction in products and logs (0 would make every log -inf)


def aggregate(sources: Sequence[DeviceSpace], how: str = "geomean", q: float = 0.25,
              weights: Sequence[float] | None = None) -> np.ndarray:
    """Score per configuration from the sources' fractions of optimum (lower = better).

    ``geomean``: -mean log fraction (the consensus; ``weights`` make it a weighted mean); ``quantile``: -the
    ``q``-quantile of the fractions (a configuration good on most sources); ``maximin``: -the worst
    fraction; ``borda``: mean rank (1 = best) over the sources.
    """
    if not sources:
        raise ValueError("aggregate needs at least one source device")
    f = np.array([fractions(s.values) for s in sources])
    if how == "geomean":
        w = np.ones(len(sources)) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (len(sources),) or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights must be {len(sources)} non-negative numbers, not all zero")
        return -(w[:, None] * np.log(np.maximum(f, FLOOR))).sum(0) / w.sum()
    if how == "quantile":
        if not 0 <= q <= 1:
            raise ValueError(f"quantile q must be in [0, 1], got {q}")
        return -np.quantile(f, q, axis=0)
    if how == "maximin":
        return -f.min(0)
    if how == "borda":
        return np.mean([rankdata(-row) for row in f], axis=0)
    raise ValueError(f"unknown aggregation {how!r} (geomean, quantile, maximin, borda)")


def similarity_weights(sources: Sequence[DeviceSpace], target: Mapping[str, float], names: Sequence[str],
                       tau: float = 1.0) -> np.ndarray:
    """exp(-d / tau) per source, d = Euclidean distance of standardised ``device_vector``s (sources + target)."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    d = np.array([device_vector(s.features, names) for s in sources] + [device_vector(target, names)])
    z = (d - d.mean(0)) / np.where(d.std(0) > 0, d.std(0), 1.0)
    dist = np.linalg.norm(z[:-1] - z[-1], axis=1)
    return np.exp(-dist / tau)


class BoostedTransfer:
    """Gradient-boosted trees on [configuration features ∘ device features] -> clipped relative log time.

    One model over the union of the sources (Nitro's MTL by concatenation, with boosting instead of a
    forest). The target is clipped at ``cap`` (log(e^3) = 20x slower than the optimum), so the fit spends
    itself on the good region instead of on how bad the bad configurations are.
    """

    def __init__(self, device_features: Sequence[str] = (), *, cap: float = 3.0, max_iter: int = 150,
                 learning_rate: float = 0.1, max_leaf_nodes: int = 31, seed: int = 0) -> None:
        self.device_features = tuple(device_features)
        self.cap = cap
        self.params = {"max_iter": max_iter, "learning_rate": learning_rate, "max_leaf_nodes": max_leaf_nodes,
                       "early_stopping": False, "random_state": seed}
        self._model: HistGradientBoostingRegressor | None = None
        self._x: np.ndarray | None = None

    def _rows(self, features: Mapping[str, float]) -> np.ndarray:
        assert self._x is not None
        d = np.asarray(device_vector(features, self.device_features)) if self.device_features else np.zeros(0)
        return np.concatenate([self._x, np.tile(d, (len(self._x), 1))], axis=1)

    def fit(self, x_config: np.ndarray, sources: Sequence[DeviceSpace]) -> BoostedTransfer:
        if not sources:
            raise ValueError("BoostedTransfer needs at least one source device")
        self._x = np.asarray(x_config, dtype=float)
        for s in sources:
            if len(s.values) != len(self._x):
                raise ValueError(f"source {s.device!r} has {len(s.values)} values for {len(self._x)} configurations")
        rows = np.concatenate([self._rows(s.features) for s in sources])
        y = np.concatenate([np.minimum(relative_log(s.values), self.cap) for s in sources])
        self._model = HistGradientBoostingRegressor(**self.params).fit(rows, y)
        return self

    def predict(self, features: Mapping[str, float] | None = None) -> np.ndarray:
        if self._model is None:
            raise RuntimeError("BoostedTransfer.predict before fit")
        if self.device_features and features is None:
            raise ValueError(f"this model uses device features {self.device_features}: pass the target's")
        return self._model.predict(self._rows(features or {}))


def method_aggregate(how: str, q: float = 0.25) -> Method:
    return lambda x, sources, target: aggregate(sources, how, q)


def method_similarity(names: Sequence[str], tau: float) -> Method:
    return lambda x, sources, target: aggregate(sources, "geomean",
                                                weights=similarity_weights(sources, target, names, tau))


def method_boosted(device_features: Sequence[str] = (), **kw: float) -> Method:
    return lambda x, sources, target: BoostedTransfer(device_features, **kw).fit(x, sources).predict(target)


def method_ensemble(methods: Sequence[Method]) -> Method:
    """Mean rank of several methods' scores (each method counts once, whatever its scale)."""
    if not methods:
        raise ValueError("an ensemble needs at least one method")
    return lambda x, sources, target: np.mean([rankdata(m(x, sources, target)) for m in methods], axis=0)


@dataclass
class Selection:
    """What ``nested_select`` chose, and the inner (sources-only) scores behind the choice."""

    chosen: str
    inner_mean: dict[str, float]
    inner: dict[str, dict[str, float]] = field(default_factory=dict)  # candidate -> temporary target -> score


def nested_select(x_config: np.ndarray, sources: Sequence[DeviceSpace], candidates: Mapping[str, Method],
                  *, score: Callable[[np.ndarray, DeviceSpace], float] | None = None) -> Selection:
    """Leave-one-source-out over ``sources`` only: the candidate whose top-1 choice reaches the best mean
    fraction of the temporary targets' optima (ties: the first in ``candidates`` order)."""
    if len(sources) < 3:
        raise ValueError("nested selection needs at least 3 source devices (2 to train on, 1 to score)")
    if not candidates:
        raise ValueError("nested selection needs at least one candidate method")
    score = score or (lambda pred, t: best_of(t.values, [int(np.argmin(pred))]))
    inner: dict[str, dict[str, float]] = {name: {} for name in candidates}
    for i, temp in enumerate(sources):
        rest = [s for j, s in enumerate(sources) if j != i]
        for name, method in candidates.items():
            inner[name][temp.device] = float(score(method(x_config, rest, temp.features), temp))
    means = {name: float(np.mean(list(v.values()))) for name, v in inner.items()}
    best = max(means.values())
    chosen = next(name for name in candidates if means[name] >= best - 1e-12)
    return Selection(chosen, means, inner)


def zero_shot(x_config: np.ndarray, sources: Sequence[DeviceSpace], target: Mapping[str, float],
              candidates: Mapping[str, Method]) -> tuple[int, Selection]:
    """The configuration (index) chosen for ``target`` by the method ``nested_select`` picks on the sources."""
    sel = nested_select(x_config, sources, candidates)
    pred = candidates[sel.chosen](x_config, sources, target)
    return int(np.argmin(pred)), sel
