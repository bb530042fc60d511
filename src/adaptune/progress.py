"""A rich progress bar that shows the best result so far while long work goes on.

It sits at the bottom of the package so that every layer that runs long work (tuning, labelling,
comparisons) shows progress the same way: on by default, drawn only on a terminal (a log file or a pipe
gets no bar), off when the caller asks (``progress=False``, the CLI's ``--quiet`` or ``--json``).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class BestSoFarProgress(AbstractContextManager):
    """Progress over a known (or unknown) number of steps, with a live best-so-far column."""

    def __init__(self, description: str, total: int | None, enabled: bool = True, unit: str = "ms",
                 best_label: str = "best") -> None:
        console = Console(stderr=True)
        self.enabled = enabled and console.is_terminal
        self.unit = unit
        self.best = math.inf
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn(best_label + " {task.fields[best]}"), TimeElapsedColumn(),
            console=console, disable=not self.enabled, transient=False,
        )
        self._task = self._progress.add_task(description, total=total, best="-")

    def __enter__(self) -> BestSoFarProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    def advance(self, value: float = math.inf, best_text: str | None = None) -> None:
        """One step done; ``value`` (lower is better) updates the best, or ``best_text`` replaces it."""
        if value < self.best:
            self.best = value
        if best_text is None:
            best_text = f"{self.best:.4g} {self.unit}" if math.isfinite(self.best) else "-"
        self._progress.update(self._task, advance=1, best=best_text)
