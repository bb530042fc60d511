"""What a tuning run found and what it cost: the report both the local and the distributed loop return."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from adaptune.records import DeviceInfo, Result


@dataclass
class TuneReport:
    """What a tuning run found, and what it cost."""

    problem: str
    strategy: str
    device: DeviceInfo
    best: dict[str, Any] | None
    best_time_ms: float
    default: dict[str, Any] | None
    default_time_ms: float
    evaluated: int
    failed: int
    reused: int
    wall_s: float
    db: str
    results: list[Result] = field(default_factory=list)
    others: list[TuneReport] = field(default_factory=list)  # other device kinds of a mixed cluster (executor)
    #: where the wall time went, in seconds since the start: ``worker_ready`` (the worker can measure),
    #: ``search_done`` (the last result is in); the rest until ``wall_s`` is the store and the report
    phases: dict[str, float] = field(default_factory=dict)
    #: how the (last) measurement worker was started: "fork", or "exec (why not forked)" (:mod:`adaptune.measure.process`)
    worker_start: str = ""
    #: the (last) worker's counters: compiles, compiled_ahead, compile_waits, held_up_launches, restarts, ...
    worker_stats: dict[str, int] = field(default_factory=dict)

    @property
    def speedup_over_default(self) -> float:
        if not (math.isfinite(self.best_time_ms) and math.isfinite(self.default_time_ms)):
            return math.nan
        return self.default_time_ms / self.best_time_ms

    def top(self, k: int = 5) -> list[Result]:
        return sorted((r for r in self.results if r.ok), key=lambda r: r.time_ms)[:k]

    def failure_summary(self) -> str | None:
        """One paragraph when no configuration succeeded: counts per status and the first error verbatim."""
        if self.best is not None or not self.results:
            return None
        counts = ", ".join(f"{n} {status}" for status, n in status_counts(self.results).items())
        first = next((r for r in self.results if r.error), None)
        text = (f"tuning {self.problem!r} found no working configuration: all {len(self.results)} evaluated "
                f"configurations failed ({counts}).")
        if first is not None:
            text += f" The first error ({first.status}, {config_text(first.config)}):\n{first.error.strip()}"
        return text

    def to_json(self) -> dict[str, Any]:
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "problem": self.problem, "strategy": self.strategy, "device": self.device.name,
            "best": self.best, "best_time_ms": finite(self.best_time_ms),
            "default": self.default, "default_time_ms": finite(self.default_time_ms),
            "speedup_over_default": finite(self.speedup_over_default),
            "evaluated": self.evaluated, "failed": self.failed, "reused": self.reused,
            "wall_s": self.wall_s, "db": self.db,
            "statuses": status_counts(self.results),
            "failure_summary": self.failure_summary(),
        }


class TuningFailedWarning(UserWarning):
    """Every configuration of a tuning run failed (the warning's text says how)."""


def config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def status_counts(results: list[Result]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.status)] = counts.get(str(r.status), 0) + 1
    return counts


def report_from_results(problem: Any, strategy: str, device: DeviceInfo, results: list[Result],
                        default: Result | None, reused: int, start: float, db: Any) -> TuneReport:
    """The report of one device's results: the best, the default's time, counts, wall time since ``start``."""
    ok = [r for r in results if r.ok]
    best = min(ok, key=lambda r: r.time_ms) if ok else None
    return TuneReport(
        problem=problem.name, strategy=strategy, device=device,
        best=best.config if best else None, best_time_ms=best.time_ms if best else math.inf,
        default=default.config if default else None, default_time_ms=default.time_ms if default else math.inf,
        evaluated=len(results), failed=len(results) - len(ok), reused=reused,
        wall_s=time.perf_counter() - start, db=str(db), results=results)


def warn_if_all_failed(report: TuneReport) -> None:
    for one in (report, *report.others):
        summary = one.failure_summary()
        if summary:
            warnings.warn(summary, TuningFailedWarning, stacklevel=3)
