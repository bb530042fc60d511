"""Greedy iterated local search (as Kernel Tuner's ``greedy_ils``) over the space's neighbourhoods.

First-improvement hill climbing from a random start; at a local optimum the best configuration so far
is perturbed by a short random walk and the climb restarts there; after ``restart_after`` perturbations
without a new best, it restarts from a random configuration.
"""

from __future__ import annotations

import numpy as np

from adaptune.search.base import Strategy, register
from adaptune.search.neighbourhood import neighbours


@register
class GreedyILS(Strategy):
    """Iterated first-improvement local search with random-walk perturbation and random restarts."""

    name = "greedy_ils"
    options = {"neighbourhood": "hamming", "perturbation": 3, "restart_after": 5}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        self._current: int | None = None
        self._current_value = np.inf
        self._queue: list[int] = []
        self._start: int | None = None  # a start point asked, not told yet
        self._stale = 0

    def _climb_from(self, i: int, value: float) -> None:
        self._current, self._current_value = i, value
        nb = neighbours(self.table, i, self.opts["neighbourhood"])
        self._queue = [int(j) for j in self.rng.permutation(nb)]

    def _walk(self, i: int) -> int | None:
        """A random walk of a few steps from i, ending on an unasked configuration if it can."""
        for _ in range(self.opts["perturbation"]):
            nb = neighbours(self.table, i, self.opts["neighbourhood"])
            if len(nb) == 0:
                break
            i = int(self.rng.choice(nb))
        return None if self.history.asked[i] else i

    def _propose(self) -> int | None:
        asked = self.history.asked
        while self._queue:
            j = self._queue.pop()
            if not asked[j]:
                return j
        if self._start is not None:  # waiting for the start value: explore meanwhile
            return self._random_unasked()
        best = self.history.best_index
        if best is None or self._stale >= self.opts["restart_after"]:
            self._stale = 0
            start = self._random_unasked()
        else:
            self._stale += 1
            start = self._walk(best)
            if start is None:
                start = self._walk(best)
            if start is None:
                start = self._random_unasked()
        self._start = start
        return start

    def _observe(self, index: int, value: float, improved: bool) -> None:
        if improved:
            self._stale = 0
        if index == self._start:
            self._start = None
            if np.isfinite(value):
                self._climb_from(index, value)
        elif value < self._current_value:
            self._climb_from(index, value)
