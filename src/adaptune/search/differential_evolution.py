"""Differential evolution (rand/1/bin) in parameter-position space, snapped to valid configurations."""

from __future__ import annotations

import numpy as np

from adaptune.search.base import register
from adaptune.search.evolution import EvolutionaryStrategy


@register
class DifferentialEvolution(EvolutionaryStrategy):
    """Mutant a + F (b - c) of three elite members, binomial crossover with a target member."""

    name = "differential_evolution"
    options = {"population": 20, "f": 0.7, "cr": 0.7}

    def _propose(self) -> int | None:
        elite = self._elite()
        if len(elite) < 4 or len(elite) < min(self.opts["population"], self.n) // 2:
            return self._random_unasked()
        t = self.table.astype(float)
        target, a, b, c = t[elite[self.rng.choice(len(elite), 4, replace=False)]]
        mutant = a + self.opts["f"] * (b - c)
        cross = self.rng.random(t.shape[1]) < self.opts["cr"]
        cross[self.rng.integers(t.shape[1])] = True
        trial = np.where(cross, mutant, target)
        return self._snap(np.clip(trial, t.min(axis=0), t.max(axis=0)))
