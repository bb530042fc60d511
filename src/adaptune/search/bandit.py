"""An ensemble that shares one budget among techniques, as OpenTuner's AUC bandit meta-technique does.

Each ask goes to the technique with the highest score: the area under the curve of its recent
"found a new best" history (recent successes weigh more) plus an exploration bonus
``c * sqrt(2 ln(total uses) / uses)``. All techniques see every told value, so a configuration found
by one becomes a starting point for the others.
"""

from __future__ import annotations

import math
from collections import deque

from adaptune.search.base import STRATEGIES, Strategy, register


@register
class Bandit(Strategy):
    """AUC multi-armed bandit over member strategies that share the history of asks and tells."""

    name = "bandit"
    options = {"techniques": ("greedy_ils", "annealing", "genetic", "differential_evolution", "forest"),
               "window": 50, "c": 0.2}

    def __init__(self, space, seed=None, **kw):  # type: ignore[no-untyped-def]
        super().__init__(space, seed, **kw)
        names = list(self.opts["techniques"])
        unknown = [t for t in names if t not in STRATEGIES or t in ("bandit", "auto")]
        if unknown or not names:
            raise ValueError(f"bandit: unusable technique(s) {unknown or names}; "
                             f"known: {', '.join(sorted(set(STRATEGIES) - {'bandit', 'auto'}))}")
        child_seeds = self.rng.integers(2**31, size=len(names))
        self.members: list[Strategy] = [STRATEGIES[t](space, seed=int(s), history=self.history)
                                        for t, s in zip(names, child_seeds, strict=True)]
        self._wins: list[deque[bool]] = [deque(maxlen=self.opts["window"]) for _ in names]
        self._uses = [0] * len(names)
        self._owner: dict[int, int] = {}

    def _score(self, k: int) -> float:
        total = sum(self._uses)
        if self._uses[k] == 0:
            return math.inf
        wins = self._wins[k]
        n = len(wins)
        auc = sum((i + 1) * w for i, w in enumerate(wins)) * 2.0 / (n * (n + 1)) if n else 0.0
        return auc + self.opts["c"] * math.sqrt(2.0 * math.log(total) / self._uses[k])

    def _propose(self) -> int | None:
        scores = [self._score(k) for k in range(len(self.members))]
        k = max(range(len(scores)), key=lambda i: (scores[i], -i))
        index = self.members[k]._propose()
        if index is None or self.history.asked[index]:
            index = self._random_unasked()
        if index is not None:
            self._owner[int(index)] = k
            self._uses[k] += 1
        return index

    def _observe(self, index: int, value: float, improved: bool) -> None:
        k = self._owner.pop(index, None)
        if k is not None:
            self._wins[k].append(improved)
        for m in self.members:
            m._observe(index, value, improved)
