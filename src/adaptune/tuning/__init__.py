"""Tuning orchestration: a problem tuned by a strategy under a budget into a store."""

from adaptune.tuning.problem import Problem
from adaptune.tuning.report import TuneReport, TuningFailedWarning
from adaptune.tuning.tune import tune

__all__ = ["Problem", "TuneReport", "TuningFailedWarning", "tune"]
