"""Active learning (Nitro's ``itune``): label the inputs the model is least sure about.

Start from a few inputs spread over the feature space (farthest-point sampling, one per candidate
label), then repeatedly label the pool input with the smallest best-vs-second-best margin (Joshi et
al.) and retrain, until N labels or a target fraction of oracle on a held-out set. Features of the
whole pool are computed up front: they cost far less than running every variant.

:func:`learning_curves` replays the same loop on an already measured cost matrix, so the curve of
BvSB against random labelling costs no extra measurement (benchmarks and GPU studies use it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.preprocessing import MinMaxScaler

from adaptune.adaptive.compiled import compile_predictor, predict_many
from adaptune.adaptive.dataset import LabelledSet
from adaptune.adaptive.models import FittedModel, fit_model, margins

SELECTIONS = ("bvsb", "random")


@dataclass
class ActiveResult:
    """Which pool rows were labelled (in order), the learning curve, and the last model."""

    rows: list[int]
    curve: list[dict[str, Any]]
    model: FittedModel


def farthest_points(features: np.ndarray, n: int, seed: int = 0) -> list[int]:
    """``n`` rows spread over the (scaled) feature space; the first is random."""
    xs = MinMaxScaler((-1, 1)).fit_transform(np.asarray(features, float)) if len(features) else features
    rng = np.random.default_rng(seed)
    chosen = [int(rng.integers(len(xs)))]
    dist = np.sum((xs - xs[chosen[0]]) ** 2, axis=1)
    while len(chosen) < min(n, len(xs)):
        nxt = int(np.argmax(dist))
        if dist[nxt] <= 0:
            rest = [i for i in range(len(xs)) if i not in chosen]
            nxt = int(rng.choice(rest))
        chosen.append(nxt)
        dist = np.minimum(dist, np.sum((xs - xs[nxt]) ** 2, axis=1))
    return chosen


def holdout_fraction(model: FittedModel, features: np.ndarray, runtime_costs: np.ndarray,
                     oracle: np.ndarray) -> float:
    """Mean fraction of oracle of ``model``'s choices on a labelled held-out set."""
    chosen = predict_many(compile_predictor(model.params), features)
    picked = runtime_costs[np.arange(len(chosen)), chosen]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(np.isfinite(picked), oracle / picked, 0.0)
    return float(np.nanmean(np.where(np.isfinite(oracle), frac, np.nan)))


def run_loop(features: np.ndarray, label_rows: Callable[[list[int]], tuple[np.ndarray, np.ndarray]],
             max_labels: int, *, n_initial: int, score: Callable[[FittedModel], float] | None = None,
             target: float | None = None, select: str = "bvsb", kind: str = "svm", seed: int = 0,
             on_step: Callable[[dict[str, Any]], None] | None = None, init_seed: int | None = None) -> ActiveResult:
    """The labelling loop over a pool; ``label_rows(rows)`` returns (costs, runtime costs) of ``rows``."""
    if select not in SELECTIONS:
        raise ValueError(f"unknown selection {select!r}; choose one of {SELECTIONS}")
    if max_labels < 1:
        raise ValueError("active learning needs at least one label")
    rng = np.random.default_rng(seed + 1)
    labelled = farthest_points(features, min(n_initial, max_labels), seed if init_seed is None else init_seed)
    curve: list[dict[str, Any]] = []
    while True:
        costs, runtime = label_rows(labelled)
        model = fit_model(kind, features[labelled], costs, runtime, seed=seed, coarse=True, score_repeats=0)
        point: dict[str, Any] = {"labels": len(labelled), "cv_fraction_of_oracle": model.cv_fraction}
        if score is not None:
            point["fraction_of_oracle"] = score(model)
        curve.append(point)
        if on_step:
            on_step(point)
        unlabelled = np.setdiff1d(np.arange(len(features)), labelled)
        if len(labelled) >= max_labels or len(unlabelled) == 0:
            break
        if target is not None and point.get("fraction_of_oracle", 0.0) >= target:
            break
        if select == "bvsb":
            nxt = _least_certain(model, features, labelled, unlabelled)
        else:
            nxt = int(rng.choice(unlabelled))
        labelled.append(nxt)
    return ActiveResult(labelled, curve, model)


def _least_certain(model: FittedModel, features: np.ndarray, labelled: list[int], unlabelled: np.ndarray) -> int:
    """The unlabelled row with the smallest best-vs-second-best margin.

    When the model picks one label for the whole pool it has no decision boundary there and its
    margins only rank rows by noise (with few labels, a small-C SVM predicting the majority label
    kept asking about inputs like those it had): then, and among exactly equal margins, take the
    row farthest from every labelled row in scaled feature space, so the loop explores.
    """
    xs = MinMaxScaler((-1, 1)).fit_transform(np.asarray(features, float))
    candidates = unlabelled
    if len(np.unique(model.predict(features[unlabelled]))) > 1:
        m = margins(model, features[unlabelled])
        candidates = unlabelled[m <= m.min() + 1e-12]
        if len(candidates) == 1:
            return int(candidates[0])
    gap = ((xs[candidates][:, None, :] - xs[labelled][None, :, :]) ** 2).sum(axis=2).min(axis=1)
    return int(candidates[int(np.argmax(gap))])


def active_learn(lset: LabelledSet, max_labels: int, *, holdout: LabelledSet | None = None,
                 target: float | None = None, kind: str = "svm", select: str = "bvsb", seed: int = 0,
                 progress: bool = True) -> ActiveResult:
    """Active learning that measures only the inputs it picks (through ``lset``, so stored labels are reused)."""
    from rich.console import Console

    if target is not None and holdout is None:
        raise ValueError("target= needs a holdout= set to measure the fraction of oracle on")
    features = lset.compute_features()
    score = None
    if holdout is not None:
        holdout.labels = lset.labels  # the same candidate labels, growing together

        def score(model: FittedModel) -> float:
            holdout.label(grow=False)
            _, runtime = holdout.costs()
            return holdout_fraction(model, holdout.features, runtime, holdout.oracle())

    def label_rows(rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
        lset.label(rows)
        return lset.costs(rows)

    console = Console(stderr=True)

    def report(point: dict[str, Any]) -> None:
        if progress:
            frac = point.get("fraction_of_oracle")
            console.print(f"[bold]{lset.cv.name}[/]: {point['labels']} labels, cv fraction of oracle "
                          f"{point['cv_fraction_of_oracle']:.3f}" + (f", hold-out {frac:.3f}" if frac else ""))

    lset.show_progress = False
    return run_loop(features, label_rows, max_labels, n_initial=max(2, len(lset.labels)), score=score,
                    target=target, select=select, kind=kind, seed=seed, on_step=report)


def learning_curves(features: np.ndarray, costs: np.ndarray, runtime_costs: np.ndarray,
                    holdout_features: np.ndarray, holdout_runtime_costs: np.ndarray,
                    holdout_oracle: np.ndarray | None = None, *, max_labels: int = 30, kind: str = "svm",
                    n_initial: int | None = None, random_repeats: int = 5, seed: int = 0,
                    selections: Sequence[str] = SELECTIONS) -> dict[str, list[dict[str, float]]]:
    """Fraction of oracle on the hold-out set against labels used, for BvSB and random labelling.

    Replays the loop on a measured pool (rows of ``costs``); random labelling is averaged over
    ``random_repeats`` seeds. Returns ``{selection: [{"labels": n, "fraction_of_oracle": f}, ...]}``.
    """
    costs, runtime_costs = np.asarray(costs, float), np.asarray(runtime_costs, float)
    oracle = np.min(holdout_runtime_costs, axis=1) if holdout_oracle is None else holdout_oracle
    n_init = n_initial or max(2, costs.shape[1])

    def score(model: FittedModel) -> float:
        return holdout_fraction(model, holdout_features, holdout_runtime_costs, oracle)

    def lookup(rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return costs[rows], runtime_costs[rows]

    curves: dict[str, list[dict[str, float]]] = {}
    for select in selections:
        runs = []
        for r in range(1 if select == "bvsb" else random_repeats):
            res = run_loop(features, lookup, max_labels, n_initial=n_init, score=score, select=select,
                           kind=kind, seed=seed + r, init_seed=seed)
            runs.append({p["labels"]: p["fraction_of_oracle"] for p in res.curve})
        counts = sorted(set.intersection(*(set(run) for run in runs)))
        curves[select] = [{"labels": n, "fraction_of_oracle": float(np.mean([run[n] for run in runs]))}
                          for n in counts]
    return curves
