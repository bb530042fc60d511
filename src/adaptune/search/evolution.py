"""What the evolutionary strategies share: the elite of told values, and snapping to valid configs."""

from __future__ import annotations

import numpy as np

from adaptune.search.base import Strategy
from adaptune.search.neighbourhood import nearest


class EvolutionaryStrategy(Strategy):
    """Steady-state evolution: each ask breeds one child from the current elite (async-friendly)."""

    options: dict = {"population": 20}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        self._span = np.maximum(self.table.max(axis=0) - self.table.min(axis=0), 1).astype(float)

    def _elite(self) -> np.ndarray:
        """Indices of the best ``population`` finite results so far, best first."""
        idx, values = self.history.told_arrays()
        ok = np.isfinite(values)
        idx, values = idx[ok], values[ok]
        return idx[np.argsort(values, kind="stable")[: self.opts["population"]]]

    def _snap(self, point: np.ndarray) -> int | None:
        """The unasked valid configuration nearest to a point in position space."""
        unasked = np.flatnonzero(~self.history.asked)
        return nearest(self.table, point, unasked, self._span)
