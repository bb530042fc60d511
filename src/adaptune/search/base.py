"""The ask/tell strategy protocol, the registry of strategies, and budgets.

A strategy only proposes indices of valid configurations of a ``Space`` and learns from the values
told back; it never runs anything. That keeps one strategy usable from a live tuner, from replay of a
recorded space and, later, from a cluster, and makes every run reproducible from its seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from adaptune.space import Space


class History:
    """What has been asked and told so far; shared by the members of an ensemble strategy."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = np.zeros(n, dtype=bool)
        self.values = np.full(n, np.nan)  # nan = asked, not told yet; inf = failed
        self.told: list[int] = []
        self.n_asked = 0
        self.best_index: int | None = None
        self.best_value = math.inf

    def mark_asked(self, index: int) -> None:
        self.asked[index] = True
        self.n_asked += 1

    def record(self, index: int, value: float) -> bool:
        """Store a told value; True when it is a new best."""
        self.values[index] = value
        self.told.append(index)
        if value < self.best_value:
            self.best_value, self.best_index = value, index
            return True
        return False

    @property
    def exhausted(self) -> bool:
        return self.n_asked >= self.n

    def told_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(self.told, dtype=np.int64)
        return idx, self.values[idx]


class Strategy:
    """Base of every search strategy: ask for an index, tell its objective (minimised; inf = failed).

    Subclasses implement ``_propose`` (an unasked index or None) and, when they learn, ``_observe``.
    ``ask`` may be called several times before the matching ``tell`` calls; an index is never
    proposed twice. Options unknown to a strategy raise ``ValueError`` naming them.
    """

    name: ClassVar[str] = "base"
    options: ClassVar[dict[str, Any]] = {}
    #: whether a proposal depends on what was told: a strategy that does not (brute force, random) may be asked
    #: far ahead without changing what it proposes (the tuner then compiles further ahead)
    adaptive: ClassVar[bool] = True

    def __init__(self, space: Space, seed: int | None = None, *, history: History | None = None,
                 **options: Any) -> None:
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"strategy {self.name!r} has no option(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(self.options)) or 'none'}")
        self.opts = {**self.options, **options}
        self.space = space
        self.n = len(space)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.history = history if history is not None else History(self.n)
        self._perm: np.ndarray | None = None
        self._perm_pos = 0
        self._table: np.ndarray | None = None

    # -- public protocol ---------------------------------------------------------------------------
    def ask(self) -> int | None:
        """Index of a valid configuration not asked before, or None when the space is exhausted."""
        if self.history.exhausted:
            return None
        index = self._propose()
        if index is None or self.history.asked[index]:
            index = self._random_unasked()
        if index is None:
            return None
        index = int(index)
        self.history.mark_asked(index)
        return index

    def tell(self, index: int, value: float) -> None:
        """Report the objective of an asked index (lower is better; ``math.inf`` for a failure)."""
        if not 0 <= index < self.n or not self.history.asked[index]:
            raise ValueError(f"tell({index}): that index was never asked")
        if not np.isnan(self.history.values[index]):
            raise ValueError(f"tell({index}): told twice")
        value = float(value)
        if math.isnan(value):
            value = math.inf
        improved = self.history.record(index, value)
        self._observe(index, value, improved)

    @property
    def best(self) -> tuple[int | None, float]:
        return self.history.best_index, self.history.best_value

    # -- for subclasses ----------------------------------------------------------------------------
    def _propose(self) -> int | None:
        raise NotImplementedError

    def _observe(self, index: int, value: float, improved: bool) -> None:
        """Learn from one told value (default: nothing to learn)."""

    @property
    def table(self) -> np.ndarray:
        """Per valid configuration, the position of each parameter value (``space.table``)."""
        if self._table is None:
            self._table = np.asarray(self.space.table)
        return self._table

    def _random_unasked(self) -> int | None:
        """A uniformly random unasked index, drawn from one seeded permutation (O(1) amortised)."""
        if self._perm is None:
            self._perm = self.rng.permutation(self.n)
        asked = self.history.asked
        while self._perm_pos < self.n:
            i = int(self._perm[self._perm_pos])
            self._perm_pos += 1
            if not asked[i]:
                return i
        return None


STRATEGIES: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make a strategy available by its ``name``."""
    STRATEGIES[cls.name] = cls
    return cls


def make_strategy(name: str, space: Space, seed: int | None = None, **options: Any) -> Strategy:
    """Build a registered strategy by name; an unknown name raises ``ValueError`` listing the known ones."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}") from None
    return cls(space, seed=seed, **options)


@dataclass(frozen=True)
class Budget:
    """Limits of a search: evaluations, wall-clock seconds, simulated seconds (replay); None = no limit.

    An evaluation is one distinct configuration asked and told, failures included, exactly as
    Kernel Tuner's ``max_fevals`` counts them in simulation mode.
    """

    max_evals: int | None = None
    max_seconds: float | None = None
    max_sim_seconds: float | None = None

    def __post_init__(self) -> None:
        for field_name in ("max_evals", "max_seconds", "max_sim_seconds"):
            v = getattr(self, field_name)
            if v is not None and not (isinstance(v, int | float) and v >= 0 and math.isfinite(v)):
                raise ValueError(f"Budget.{field_name} must be a finite number >= 0 or None, got {v!r}")

    def start(self, clock: Callable[[], float] = time.perf_counter) -> BudgetTracker:
        return BudgetTracker(self, clock)


class BudgetTracker:
    """Spends one ``Budget``: counts evaluations and simulated seconds, reads the wall clock."""

    def __init__(self, budget: Budget, clock: Callable[[], float] = time.perf_counter) -> None:
        self.budget = budget
        self._clock = clock
        self._t0 = clock()
        self.evals = 0
        self.sim_seconds = 0.0

    @property
    def wall_seconds(self) -> float:
        return self._clock() - self._t0

    def spend(self, evals: int = 1, sim_seconds: float = 0.0) -> None:
        self.evals += evals
        self.sim_seconds += sim_seconds

    def exhausted(self) -> bool:
        b = self.budget
        return ((b.max_evals is not None and self.evals >= b.max_evals)
                or (b.max_seconds is not None and self.wall_seconds >= b.max_seconds)
                or (b.max_sim_seconds is not None and self.sim_seconds >= b.max_sim_seconds))
