"""Search strategies (ask/tell), budgets, replay of recorded spaces and the comparison methodology.

Importing this package registers every strategy in ``STRATEGIES``.
"""

from adaptune.search import brute_force, random_search  # noqa: F401  (register strategies)
from adaptune.search.base import STRATEGIES, Budget, BudgetTracker, History, Strategy, make_strategy, register

__all__ = ["STRATEGIES", "Budget", "BudgetTracker", "History", "Strategy", "make_strategy", "register"]
