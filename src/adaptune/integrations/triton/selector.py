"""The model that picks a configuration for a key never measured, trained on the stored keys.

No model of its own: the features go through adaptune's selection models (``adaptive.models``: fitted
with cross-validated fraction of oracle) and the compiled predictor (``adaptive.compiled``), the same
code a ``CodeVariant`` dispatches through, so one prediction is a few NumPy operations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import Predictor, compile_predictor
from adaptune.adaptive.models import choose_model
from adaptune.integrations.triton.configs import Features

DEFAULT_KINDS = ("tree", "knn", "cost")
"""Model kinds tried (cross-validated choice among them): the fast-to-fit ones; ``svm``'s grid is slow."""


@dataclass(frozen=True)
class Selector:
    """A fitted choice of configuration index from key features, and the stored keys it learnt from."""

    predict: Predictor
    kind: str
    cv_fraction: float | None
    train_features: np.ndarray
    train_best: np.ndarray

    def ranked(self, features: np.ndarray, k: int) -> list[int]:
        """Up to ``k`` candidate configurations: the prediction, then the winners of the nearest stored keys."""
        picks = [int(self.predict(features))]
        scale = np.ptp(self.train_features, axis=0)
        scale[scale == 0] = 1.0
        distance = np.abs((self.train_features - features) / scale).sum(axis=1)
        for row in np.argsort(distance, kind="stable"):
            if len(picks) >= k:
                break
            if int(self.train_best[row]) not in picks:
                picks.append(int(self.train_best[row]))
        return picks


def fit_selector(named_keys: Sequence[Mapping[str, Any]], costs: Sequence[Sequence[float]], features: Features,
                 kinds: Sequence[str] = DEFAULT_KINDS, seed: int = 0) -> Selector | None:
    """Fit on the stored keys (rows) and their time per configuration (columns); None with nothing usable."""
    cost = np.asarray(costs, float)
    if cost.size == 0:
        return None
    keep = np.isfinite(cost).any(axis=1)
    if not keep.any():
        return None
    x = np.asarray([list(features(k)) for k in named_keys], float)[keep]
    cost = cost[keep]
    fitted, _ = choose_model(x, cost, kinds=tuple(kinds), seed=seed)
    return Selector(compile_predictor(fitted.params), fitted.kind, fitted.cv_fraction, x,
                    np.argmin(cost, axis=1))
