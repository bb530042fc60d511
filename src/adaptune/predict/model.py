"""Learn a block shape from static kernel features on the LS-CAT H100 table, and score it honestly.

Samples are (kernel, matrix size) pairs whose 20 shapes all ran. The model regresses the 20 relative
performances (``min/time``) of a sample from its features and picks the shape with the highest
prediction; a forest's leaf mean of relative performance is exactly the expected score of each shape
there, so the argmax maximises the seed's metric. Cross-validation is grouped by source repository
(LS-CAT's repositories hold near-copies of one kernel), repeated over seeds.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adaptune.predict import metric
from adaptune.predict.corpus import SHAPES

SHAPE_INDEX = {s: i for i, s in enumerate(SHAPES)}


@dataclass
class Samples:
    """(kernel, size) samples with complete shape timings."""

    kernel: np.ndarray      # (n,) kernel ids
    size: np.ndarray        # (n,) matrix size
    times: np.ndarray       # (n, 20) microseconds
    perf: np.ndarray        # (n, 20) min/time
    n_rows: int             # ok rows in the table (all samples, complete or not)
    n_incomplete: int       # samples dropped because some shape failed or was skipped
    times2: np.ndarray | None = None  # (n, 20) second interleaved sweep (NaN where not measured twice)


def load_rows(path: str | Path) -> Iterable[dict[str, str]]:
    """Rows of the tidy table (csv or csv.gz)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        yield from csv.DictReader(f)


def build_samples(rows: Iterable[dict[str, str]], min_time_us: float = 0.0,
                  kernels: set[str] | None = None) -> Samples:
    """Group ok rows into (kernel, size) samples; keep those where all 20 shapes have a time
    (and, with ``kernels``, only those kernels)."""
    table: dict[tuple[str, int], np.ndarray] = {}
    table2: dict[tuple[str, int], np.ndarray] = {}
    n_ok = 0
    for r in rows:
        if kernels is not None and r["kernel"] not in kernels:
            continue
        key = (r["kernel"], int(r["size"]))
        t = table.setdefault(key, np.full(len(SHAPES), np.nan))
        t2 = table2.setdefault(key, np.full(len(SHAPES), np.nan))
        if r["status"] == "ok" and r["time_us"] not in ("", "None"):
            t[SHAPE_INDEX[(int(r["bx"]), int(r["by"]))]] = float(r["time_us"])
            n_ok += 1
            if r.get("time2_us") not in (None, "", "None"):
                t2[SHAPE_INDEX[(int(r["bx"]), int(r["by"]))]] = float(r["time2_us"])
    keys = sorted(k for k, t in table.items() if np.isfinite(t).all() and np.nanmin(t) > min_time_us)
    times = np.array([table[k] for k in keys]).reshape(-1, len(SHAPES))
    times2 = np.array([table2[k] for k in keys]).reshape(-1, len(SHAPES))
    return Samples(np.array([k[0] for k in keys]), np.array([k[1] for k in keys]), times,
                   metric.relative_performance(times), n_ok, len(table) - len(keys), times2)


def feature_matrix(samples: Samples, kernel_features: dict[str, dict[str, float]], names: Sequence[str]
                   ) -> np.ndarray:
    """Rows of kernel features (missing -> 0) plus log2 of the matrix size."""
    x = np.zeros((len(samples.kernel), len(names) + 1))
    for i, (k, s) in enumerate(zip(samples.kernel, samples.size, strict=True)):
        f = kernel_features.get(k, {})
        x[i, :-1] = [f.get(n, 0.0) for n in names]
        x[i, -1] = math.log2(s)
    return x


def make_model(kind: str = "forest", seed: int = 0, n_jobs: int = -1):
    """A multi-output regressor of the 20 relative performances (``n_jobs=1`` on a shared host)."""
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

    if kind == "forest":
        return RandomForestRegressor(n_estimators=100, min_samples_leaf=3, max_features=0.5, n_jobs=n_jobs,
                                     random_state=seed)
    if kind == "extra":
        return ExtraTreesRegressor(n_estimators=300, min_samples_leaf=3, max_features=0.5, n_jobs=n_jobs,
                                   random_state=seed)
    raise ValueError(f"unknown model kind {kind!r}; use 'forest' or 'extra'")


def group_folds(n: int, groups: np.ndarray, seed: int, folds: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index pairs of a repository-grouped K-fold split for ``seed``; every model scored on
    the LS-CAT table uses these, so their scores compare fold for fold."""
    from sklearn.model_selection import GroupKFold

    return list(GroupKFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros((n, 1)), groups=groups))


def grouped_cv_choices(x: np.ndarray, perf: np.ndarray, groups: np.ndarray, seed: int, kind: str = "forest",
                       folds: int = 5, n_jobs: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold shape choices of the model and of the fold's most common best shape, so callers can
    score the same choices on parts of the samples or on other measurements."""
    choice = np.zeros(len(perf), dtype=int)
    common = np.zeros(len(perf), dtype=int)
    for train, test in group_folds(len(perf), groups, seed, folds):
        model = make_model(kind, seed, n_jobs).fit(x[train], perf[train])
        choice[test] = np.argmax(model.predict(x[test]), axis=1)
        common[test] = metric.most_common_best(perf[train])
    return choice, common


def grouped_cv(x: np.ndarray, perf: np.ndarray, groups: np.ndarray, seed: int, kind: str = "forest",
               folds: int = 5, extra_choices: dict[str, np.ndarray] | None = None,
               score_on: dict[str, np.ndarray] | None = None, n_jobs: int = -1) -> dict[str, float]:
    """Out-of-fold scores of the model and the fold-trained baselines (most common best shape);
    ``score_on`` scores the same out-of-fold choices on other perf arrays (e.g. a second sweep)."""
    choice, common = grouped_cv_choices(x, perf, groups, seed, kind, folds, n_jobs)
    out = {"score_model": metric.score(perf, choice), "geomean_model": metric.geomean_ratio(perf, choice),
           "score_most_common": metric.score(perf, common)}
    for name, other in (score_on or {}).items():  # the same choices scored on other measurements
        out[f"score_model_on_{name}"] = metric.score(other, choice)
    for name, ch in (extra_choices or {}).items():
        out[f"score_{name}"] = metric.score(perf, ch)
    return out
