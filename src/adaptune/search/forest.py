"""Tree-ensemble surrogate (SMAC / AutoTVM style): extremely randomised trees on the parameter positions.

Trees need no distance between configurations, so ordinal, categorical and boolean parameters all
work on their positions in ``space.table``; the spread of the trees' predictions stands in for the
model's uncertainty in expected improvement.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptune.search.base import register
from adaptune.search.surrogate import SurrogateStrategy, informative_columns


@register
class ForestSearch(SurrogateStrategy):
    """Extra-trees surrogate on log time; EI over a pool of unasked valid configurations."""

    name = "forest"
    options = {**SurrogateStrategy.options, "n_initial": 15, "n_trees": 32, "refit_every": 2}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        t = np.asarray(space.table, dtype=float)
        self._x = t[:, informative_columns(t)] if t.shape[1] else t
        self._model: Any = None  # an ExtraTreesRegressor once fitted

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        # imported here: scikit-learn's 1.5 s of import is for the model-based strategies alone
        from sklearn.ensemble import ExtraTreesRegressor

        self._model = ExtraTreesRegressor(n_estimators=self.opts["n_trees"], min_samples_leaf=1,
                                          max_features=0.8, bootstrap=False, n_jobs=1,
                                          random_state=int(self.rng.integers(2**31)))
        self._model.fit(x, y)

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self._model is not None
        per_tree = np.stack([t.predict(x) for t in self._model.estimators_])
        return per_tree.mean(axis=0), per_tree.std(axis=0)
