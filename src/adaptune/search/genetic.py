"""Genetic algorithm: tournament selection, uniform crossover and mutation on parameter positions."""

from __future__ import annotations

import numpy as np

from adaptune.search.base import register
from adaptune.search.evolution import EvolutionaryStrategy


@register
class Genetic(EvolutionaryStrategy):
    """Steady-state GA; children that are invalid or already seen are snapped to the nearest new valid one."""

    name = "genetic"
    options = {"population": 20, "mutation": None, "tournament": 3}

    def _propose(self) -> int | None:
        elite = self._elite()
        if len(elite) < min(self.opts["population"], self.n) // 2:
            return self._random_unasked()
        t = self.table
        k = min(self.opts["tournament"], len(elite))
        # elite is sorted best first: the best of k random picks is the smallest position
        a = elite[self.rng.choice(len(elite), k, replace=False).min()]
        b = elite[self.rng.choice(len(elite), k, replace=False).min()]
        child = np.where(self.rng.random(t.shape[1]) < 0.5, t[a], t[b]).astype(float)
        rate = self.opts["mutation"] or 1.0 / max(t.shape[1], 1)
        hi = t.max(axis=0)
        lo = t.min(axis=0)
        for j in np.flatnonzero(self.rng.random(t.shape[1]) < rate):
            child[j] = self.rng.integers(lo[j], hi[j] + 1)
        return self._snap(child)
