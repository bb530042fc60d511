"""Random search without replacement: the baseline of the comparison methodology."""

from __future__ import annotations

from adaptune.search.base import Strategy, register


@register
class RandomSearch(Strategy):
    """Uniformly random valid configurations, each at most once (a seeded permutation)."""

    name = "random"
    adaptive = False

    def _propose(self) -> int | None:
        return self._random_unasked()
