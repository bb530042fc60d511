"""Search strategies (ask/tell), budgets, replay of recorded spaces and the comparison methodology.

Importing this package registers every strategy in ``STRATEGIES``.
"""

from adaptune.search import (  # noqa: F401  (importing registers the strategies)
    annealing,
    auto,
    bandit,
    bayes,
    brute_force,
    differential_evolution,
    forest,
    genetic,
    local,
    random_search,
    warm,
)
from adaptune.search.base import STRATEGIES, Budget, BudgetTracker, History, Strategy, make_strategy, register
from adaptune.search.replay import Replay, Trace

__all__ = ["STRATEGIES", "Budget", "BudgetTracker", "History", "Replay", "Strategy", "Trace", "make_strategy",
           "register"]
