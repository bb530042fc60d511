"""Selection models: fit on (features, per-label costs), choose hyperparameters by what matters.

Every model is scored by cross-validated *fraction of oracle* (best cost / cost of the chosen label,
with the run-time fallback applied), not by accuracy: a wrong choice between two near-equal
variants costs nothing, a wrong choice of a 10x slower one costs a lot. ``svm`` follows Nitro
(RBF kernel, features scaled to [-1, 1], C and gamma from libsvm's grid.py ranges); ``cost`` is the
cost-aware alternative: kernel ridge regression of every label's relative performance, argmax.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.preprocessing import MinMaxScaler

from adaptune.adaptive.compiled import (
    ModelParams,
    compile_predictor,
    constant_model,
    export_model,
    kernel_ridge_scores,
    predict_many,
)

MODEL_KINDS = ("svm", "tree", "knn", "cost", "forest", "boosting")
"""Model names ``train(model=...)`` accepts, besides ``"auto"`` (cross-validated choice among them)."""


@dataclass
class FittedModel:
    """A trained selection model: its exported arrays, the estimator (for margins) and how it scored."""

    kind: str
    params: ModelParams
    estimator: Any = None
    hyper: dict[str, Any] = field(default_factory=dict)
    cv_fraction: float | None = None

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Label indices for rows of raw features, through the compiled path used at run time."""
        return predict_many(compile_predictor(self.params), features)


def fraction_of_oracle(costs: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Per input: best finite cost / cost of the chosen label (0 where the choice failed)."""
    costs = np.asarray(costs, float)
    best = np.min(costs, axis=1)
    picked = costs[np.arange(len(costs)), np.asarray(chosen, int)]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(np.isfinite(picked), best / picked, 0.0)
    return np.where(np.isfinite(best), frac, np.nan)


def relative_performance(costs: np.ndarray) -> np.ndarray:
    """Each label's fraction of oracle on each input (1 = best, 0 = failed): the cost-aware target."""
    costs = np.asarray(costs, float)
    best = np.min(costs, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(costs), best / costs, 0.0)


# ------------------------------------------------------------------------------- estimator grids

_LIBSVM_C = [2.0**e for e in range(-5, 16, 2)]
_LIBSVM_GAMMA = [2.0**e for e in range(-15, 4, 2)]


def _grid(kind: str, n_train: int, coarse: bool) -> list[dict[str, Any]]:
    if kind == "svm":
        cs = _LIBSVM_C[::2] if coarse else _LIBSVM_C
        gs = _LIBSVM_GAMMA[::2] if coarse else _LIBSVM_GAMMA
        return [{"C": c, "gamma": g} for c, g in itertools.product(cs, gs)]
    if kind == "cost":
        gs = [2.0**e for e in range(-7, 4, 2)]
        return [{"alpha": a, "gamma": g} for a, g in itertools.product([1e-3, 1e-2, 1e-1, 1.0], gs)]
    if kind == "tree":
        return [{"max_depth": d, "min_samples_leaf": m} for d, m in itertools.product([None, 3, 5, 8], [1, 2])]
    if kind == "knn":
        return [{"n_neighbors": k} for k in (1, 3, 5, 7) if k < max(n_train, 2)]
    if kind == "forest":
        return [{"max_depth": d, "max_features": f} for d, f in itertools.product([None, 6], ["sqrt", None])]
    if kind == "boosting":
        return [{"learning_rate": r, "max_depth": d} for r, d in itertools.product([0.1, 0.3], [2, 3])]
    raise ValueError(f"unknown model {kind!r}; choose one of: auto, {', '.join(MODEL_KINDS)}")


def _make(kind: str, hyper: dict[str, Any], seed: int) -> Any:
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    if kind == "svm":
        return SVC(kernel="rbf", **hyper)
    if kind == "cost":
        return KernelRidge(kernel="rbf", **hyper)
    if kind == "tree":
        return DecisionTreeClassifier(random_state=seed, **hyper)
    if kind == "knn":
        return KNeighborsClassifier(algorithm="brute", **hyper)
    if kind == "forest":
        return RandomForestClassifier(n_estimators=50, random_state=seed, **hyper)
    if kind == "boosting":
        return GradientBoostingClassifier(n_estimators=50, random_state=seed, **hyper)
    raise ValueError(f"unknown model {kind!r}")


def _fit_predict(kind: str, hyper: dict[str, Any], seed: int, xs_train: np.ndarray, y_train: np.ndarray,
                 rel_train: np.ndarray, xs_test: np.ndarray) -> np.ndarray:
    """Label indices predicted for ``xs_test`` by a model fitted on the training rows."""
    if kind == "cost":
        est = _make(kind, hyper, seed).fit(xs_train, rel_train)
        return np.argmax(est.predict(xs_test).reshape(len(xs_test), -1), axis=1)
    present = np.unique(y_train)
    if len(present) == 1:
        return np.full(len(xs_test), present[0])
    if kind == "knn":
        hyper = {"n_neighbors": min(hyper["n_neighbors"], len(y_train))}
    return _make(kind, hyper, seed).fit(xs_train, y_train).predict(xs_test)


def _folds(n: int, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold

    return list(KFold(n_splits=min(folds, n), shuffle=True, random_state=seed).split(np.zeros(n)))


def cross_validated_fraction(kind: str, hyper: dict[str, Any], xs: np.ndarray, costs: np.ndarray,
                             runtime_costs: np.ndarray, seed: int = 0, folds: int = 5,
                             repeats: int = 1) -> float:
    """Mean fraction of oracle of out-of-fold predictions (features already scaled), averaged over
    ``repeats`` differently shuffled k-fold splits (seeds ``seed``, ``seed + 1``, ...): with a few
    dozen inputs one split's score moves by several percent with the shuffle alone."""
    return cross_validated_scores(kind, hyper, xs, costs, runtime_costs, seed, folds, repeats)[0]


def cross_validated_scores(kind: str, hyper: dict[str, Any], xs: np.ndarray, costs: np.ndarray,
                           runtime_costs: np.ndarray, seed: int = 0, folds: int = 5,
                           repeats: int = 1) -> tuple[float, float]:
    """(mean fraction of oracle, accuracy) of out-of-fold predictions; accuracy only breaks ties."""
    y = np.argmin(costs, axis=1)
    rel = relative_performance(runtime_costs)
    fractions, accuracies = [], []
    for r in range(max(1, repeats)):
        chosen = np.empty(len(y), int)
        for train, test in _folds(len(y), folds, seed + r):
            chosen[test] = _fit_predict(kind, hyper, seed, xs[train], y[train], rel[train], xs[test])
        fractions.append(float(np.nanmean(fraction_of_oracle(runtime_costs, chosen))))
        accuracies.append(float(np.mean(chosen == y)))
    return float(np.mean(fractions)), float(np.mean(accuracies))


def fit_model(kind: str, features: np.ndarray, costs: np.ndarray, runtime_costs: np.ndarray | None = None,
              *, seed: int = 0, folds: int = 5, coarse: bool = False, score_repeats: int = 3,
              shared_scale: Sequence[Sequence[int]] = ()) -> FittedModel:
    """Fit one model kind with cross-validated hyperparameters.

    Hyperparameters are chosen on one k-fold split; the reported ``cv_fraction`` is then re-estimated
    on ``score_repeats`` fresh splits (other shuffles), so that it is not the maximum of a grid's noisy
    scores: a kind with a large grid (the SVM's 100 points) would otherwise always look best.

    ``costs``: (inputs, labels), ``inf`` where a label may not or did not run (training treats a failed
    constraint as infinitely slow); ``runtime_costs``: the same with the run-time fallback applied (a
    label whose constraint fails costs what the default costs). Rows where everything failed are dropped.

    ``shared_scale``: groups of column indices that share *one* scale (``share_ranges``: the widest column
    of the group spans [-1, 1], the others proportionally less) instead of each column its own range. For columns in one unit (e.g. log2 device features: one unit is
    a factor 2) a per-column range would make a feature that varies 1.8x among the training rows weigh as
    much as one that varies 10,000x, and put a new row's value far outside [-1, 1] on the small one.
    """
    features = np.asarray(features, float)
    costs = np.asarray(costs, float)
    runtime_costs = costs if runtime_costs is None else np.asarray(runtime_costs, float)
    if features.ndim != 2 or len(features) != len(costs):
        raise ValueError(f"features {features.shape} and costs {costs.shape} must have one row per input")
    keep = np.isfinite(costs).any(axis=1)
    features, costs, runtime_costs = features[keep], costs[keep], runtime_costs[keep]
    if len(features) == 0:
        raise ValueError("no training input has a label: every variant failed on every input")
    scaler = share_ranges(MinMaxScaler(feature_range=(-1, 1)).fit(features), shared_scale)
    xs = scaler.transform(features)
    y = np.argmin(costs, axis=1)
    n_labels = costs.shape[1]
    if len(np.unique(y)) == 1 and kind != "cost":
        return FittedModel(kind, constant_model(int(y[0]), features.shape[1]), None, {"constant": True},
                           cv_fraction=float(np.nanmean(fraction_of_oracle(runtime_costs, y))))
    best_score, best_key, best_hyper = -1.0, (-1.0, -1.0), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny folds make some estimators complain; the score says it all
        for hyper in _grid(kind, len(y), coarse):
            score, accuracy = cross_validated_scores(kind, hyper, xs, costs, runtime_costs, seed, folds) \
                if len(y) >= 2 else (1.0, 1.0)
            # ties in fraction of oracle (common with few labels: a model that always picks the
            # majority label ties with better ones) go to the more accurate hyperparameters
            if (round(score, 12), round(accuracy, 12)) > best_key:
                best_score, best_key, best_hyper = score, (round(score, 12), round(accuracy, 12)), hyper
        assert best_hyper is not None
        if kind == "cost":
            est = _make(kind, best_hyper, seed).fit(xs, relative_performance(runtime_costs))
            classes = np.arange(n_labels)
        else:
            hyper = dict(best_hyper)
            if kind == "knn":
                hyper["n_neighbors"] = min(hyper["n_neighbors"], len(y))
            est = _make(kind, hyper, seed).fit(xs, y)
            classes = est.classes_
    params = export_model(est, scaler.scale_, scaler.min_, classes)
    if score_repeats > 0 and len(y) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            best_score = cross_validated_fraction(kind, best_hyper, xs, costs, runtime_costs, seed + 1000,
                                                  folds, score_repeats)
    return FittedModel(kind, params, est, dict(best_hyper), cv_fraction=best_score)


def share_ranges(scaler: MinMaxScaler, groups: Sequence[Sequence[int]]) -> MinMaxScaler:
    """Give each group of columns of a fitted [-1, 1] ``scaler`` one common scale (in place): every column
    still starts at -1, but one unit of the columns is the same length in all of them, set so that the
    group's widest column spans [-1, 1]. Only the columns' own ranges matter, not their offsets, so the
    result does not depend on the features' units (GB/s or MB/s shift a log2 column, not its range)."""
    for group in groups:
        cols = np.asarray(list(group), int)
        if len(cols) == 0:
            continue
        widest = float((scaler.data_max_[cols] - scaler.data_min_[cols]).max())
        scale = 2.0 / widest if widest > 0 else 1.0
        scaler.scale_[cols] = scale
        scaler.min_[cols] = -1.0 - scaler.data_min_[cols] * scale
    return scaler


AUTO_PREFERENCE = ("cost", "tree", "svm", "knn", "forest", "boosting")
"""``auto``'s order among kinds whose scores tie: the cost-aware model first (it weighs a wrong choice
by what it costs), then by query time (a single compiled tree decides in ~1-2 µs, forests and boosting
need tens of trees)."""

AUTO_TIE = 0.005
"""Scores within this fraction of oracle of the best count as tied: below the spread of repeated CV."""


def choose_model(features: np.ndarray, costs: np.ndarray, runtime_costs: np.ndarray | None = None, *,
                 kinds: Sequence[str] = MODEL_KINDS, seed: int = 0, tie: float = AUTO_TIE,
                 progress: Callable[[str, float], None] | None = None) -> tuple[FittedModel, dict[str, float]]:
    """``model="auto"``: fit every kind, keep the best repeated-CV fraction of oracle.

    Kinds within ``tie`` of the best are tied; among those the earliest in :data:`AUTO_PREFERENCE` wins.
    """
    scores: dict[str, float] = {}
    fitted_by_kind: dict[str, FittedModel] = {}
    for kind in kinds:
        fitted = fit_model(kind, features, costs, runtime_costs, seed=seed)
        fitted_by_kind[kind] = fitted
        scores[kind] = float(fitted.cv_fraction or 0.0)
        if progress:
            progress(kind, scores[kind])
    return fitted_by_kind[pick_kind(scores, tie)], scores


def pick_kind(scores: dict[str, float], tie: float = AUTO_TIE) -> str:
    """The kind ``auto`` picks from cross-validated scores (see :func:`choose_model`)."""
    if not scores:
        raise ValueError("no model kinds to choose from")
    top = max(scores.values())
    tied = [k for k, v in scores.items() if v >= top - tie]
    order = {k: i for i, k in enumerate(AUTO_PREFERENCE)}
    return min(tied, key=lambda k: (order.get(k, len(order)), -scores[k]))


def margins(model: FittedModel, features: np.ndarray) -> np.ndarray:
    """Best-vs-second-best margin per row (small = uncertain), for active learning.

    Probabilistic models use their class probabilities; the SVM uses scikit-learn's one-vs-rest
    shaped decision values (votes plus normalised confidences), which avoids Platt scaling's
    internal cross-validation on a handful of labels; the cost-aware model uses its predicted
    relative performances.
    """
    features = np.asarray(features, float)
    p = model.params
    if p.kind == "constant" or model.estimator is None:
        return np.zeros(len(features))
    if p.kind == "kernel_ridge":
        scores = kernel_ridge_scores(p, features)
    else:
        xs = features * p.arrays["scale"] + p.arrays["offset"]
        est = model.estimator
        scores = est.predict_proba(xs) if hasattr(est, "predict_proba") and p.kind != "svm" \
            else est.decision_function(xs)
    scores = np.asarray(scores, float)
    if scores.ndim == 1:
        return np.abs(scores)
    top = np.sort(scores, axis=1)
    return top[:, -1] - top[:, -2]
