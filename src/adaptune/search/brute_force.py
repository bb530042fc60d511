"""Brute force: every valid configuration in the space's order (itertools.product over the params)."""

from __future__ import annotations

from adaptune.search.base import Strategy, register


@register
class BruteForce(Strategy):
    """Visits configurations in index order; the reference that every other strategy is judged by."""

    name = "brute_force"
    adaptive = False

    def _propose(self) -> int | None:
        asked = self.history.asked
        pos = getattr(self, "_next", 0)
        while pos < self.n and asked[pos]:
            pos += 1
        self._next = pos + 1
        return pos if pos < self.n else None
