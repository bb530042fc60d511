"""Simulated annealing over neighbourhoods, on log time so the temperature is scale-free."""

from __future__ import annotations

import math

import numpy as np

from adaptune.search.base import Strategy, register
from adaptune.search.neighbourhood import neighbours


@register
class Annealing(Strategy):
    """Metropolis acceptance of neighbour moves with a geometric cooling schedule and reheats.

    ``t0`` is the initial temperature in log-time units (0.3: a 35 % slower move is accepted with
    probability 1/e); after ``reheat_after`` rejected moves in a row the temperature is reset.
    """

    name = "annealing"
    options = {"t0": 0.3, "cooling": 0.97, "t_min": 0.005, "neighbourhood": "adjacent", "reheat_after": 30}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        self._current: int | None = None
        self._current_log = math.inf
        self._t = self.opts["t0"]
        self._rejected = 0
        self._start: int | None = None

    def _propose(self) -> int | None:
        if self._current is None:
            if self._start is None:
                self._start = self._random_unasked()
                return self._start
            return self._random_unasked()
        asked = self.history.asked
        for method in (self.opts["neighbourhood"], "hamming"):
            nb = neighbours(self.table, self._current, method)
            nb = nb[~asked[nb]]
            if len(nb):
                return int(self.rng.choice(nb))
        # no unasked neighbour left: jump to a random configuration and carry on from there
        self._current, self._current_log, self._start = None, math.inf, None
        self._start = self._random_unasked()
        return self._start

    def _observe(self, index: int, value: float, improved: bool) -> None:
        log_v = math.log(value) if math.isfinite(value) and value > 0 else math.inf
        if self._current is None:
            if index == self._start and math.isfinite(log_v):
                self._current, self._current_log = index, log_v
            elif index == self._start:
                self._start = None
            return
        delta = log_v - self._current_log
        if delta <= 0 or (math.isfinite(delta) and self.rng.random() < math.exp(-delta / self._t)):
            self._current, self._current_log = index, log_v
            self._rejected = 0
        else:
            self._rejected += 1
        self._t = max(self._t * self.opts["cooling"], self.opts["t_min"])
        if self._rejected >= self.opts["reheat_after"]:
            self._t, self._rejected = self.opts["t0"], 0
            best = self.history.best_index
            if best is not None:
                self._current, self._current_log = best, float(np.log(self.history.best_value))
