"""Declaring thresholds over our own multi-versioned code, running it under an assignment, and collecting
comparison values with instrumentation (dry runs that skip the kernels).

A multi-versioned program is a function ``body(run, data)`` that asks ``run.compare(name, value)`` wherever it
must choose a code version and launches the chosen version unless ``run.dry``. Loops go through
``run.loop(iterable)`` so each iteration is its own pass (flow) with its own comparison values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptune.thresholds.model import ThresholdModel
from adaptune.thresholds.tree import DEFAULT_THRESHOLD, ThresholdDecl, format_print_sizes

FORCE_TRUE = -(2**62)  # threshold <= any value
FORCE_FALSE = 2**62


class ThresholdUsageError(ValueError):
    """A program compared an undeclared threshold, or one whose declared dependencies do not hold."""


@dataclass
class Run:
    """One execution of a multi-versioned program under a threshold assignment, recording every comparison."""

    decls: dict[str, ThresholdDecl]
    assignment: Mapping[str, int]
    dry: bool = False
    default: int = DEFAULT_THRESHOLD
    events: list[tuple[int, str, int, bool]] = field(default_factory=list)  # (pass, name, value, outcome)
    versions: list[str] = field(default_factory=list)
    _pass: int = 0
    _seen: dict[tuple[int, str], bool] = field(default_factory=dict)

    def compare(self, name: str, value: int) -> bool:
        """``threshold <= value`` for the declared threshold ``name``; checks its dependencies held."""
        decl = self.decls.get(name)
        if decl is None:
            raise ThresholdUsageError(f"threshold {name!r} is not declared; declared: {sorted(self.decls)}")
        for dep, outcome in decl.deps:
            if self._seen.get((self._pass, dep)) is not outcome:
                raise ThresholdUsageError(f"{name!r} compared in pass {self._pass} but its dependency {dep!r} "
                                          f"was not compared with outcome {outcome} first")
        result = int(self.assignment.get(name, self.default)) <= int(value)
        self._seen[(self._pass, name)] = result
        self.events.append((self._pass, name, int(value), result))
        return result

    def loop(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Iterate, giving each iteration its own pass (iteration 0 shares pass 0 with straight-line code)."""
        start = self._pass
        for i, item in enumerate(iterable):
            self._pass = start + i
            yield item
        self._pass = start

    def version(self, label: str) -> None:
        """Note that a code version ran (for the executed-version signature and for humans)."""
        self.versions.append(f"{self._pass}:{label}")

    def flows(self) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for p, name, value, _ in self.events:
            out.setdefault(p, {})[name] = value
        return out


Body = Callable[[Run, Any], Any]


class ThresholdProgram:
    """A program with code versions chosen by declared thresholds.

    >>> prog = ThresholdProgram("matmul")
    >>> prog.threshold("suff_outer_par_0")
    'suff_outer_par_0'
    >>> prog.threshold("suff_intra_par_1", after={"suff_outer_par_0": False})
    'suff_intra_par_1'
    """

    def __init__(self, name: str, body: Body | None = None) -> None:
        self.name = name
        self.body = body
        self._decls: dict[str, ThresholdDecl] = {}

    def threshold(self, name: str, after: Mapping[str, bool] | None = None) -> str:
        """Declare a threshold compared only when each threshold in ``after`` had the given outcome.

        ``after`` lists the whole ancestor path, as Futhark's ``--print-sizes`` does.
        """
        if name in self._decls:
            raise ThresholdUsageError(f"threshold {name!r} declared twice")
        deps = tuple((dep, bool(o)) for dep, o in (after or {}).items())
        for dep, _ in deps:
            if dep not in self._decls:
                raise ThresholdUsageError(f"{name!r} depends on {dep!r}, which is not declared (declare parents "
                                          "first)")
        self._decls[name] = ThresholdDecl(name, deps)
        return name

    @property
    def decls(self) -> list[ThresholdDecl]:
        return list(self._decls.values())

    def print_sizes(self) -> str:
        """The declarations in Futhark's ``--print-sizes`` syntax (round-trips through the parser)."""
        return format_print_sizes(self.decls)

    def run(self, data: Any, assignment: Mapping[str, int] | None = None, *, dry: bool = False) -> Run:
        if self.body is None:
            raise ThresholdUsageError(f"program {self.name!r} has no body to run")
        run = Run(self._decls, dict(assignment or {}), dry=dry)
        self.body(run, data)
        return run

    def collect(self, data: Any) -> list[dict[str, int]]:
        """The comparison values of one dataset, all passes, every threshold that any path reaches.

        One dry run with the defaults, then one per threshold with its dependencies forced to the outcomes
        it needs (threshold -2^62 is always true, 2^62 always false), so thresholds off the default path are
        covered too. A value that changes between runs (it depended on another threshold) is an error.
        """
        assignments: list[dict[str, int]] = [{}]
        for d in self.decls:
            assignments.append({dep: FORCE_TRUE if o else FORCE_FALSE for dep, o in d.deps})
        merged: dict[int, dict[str, int]] = {}
        for a in assignments:
            for p, flow in self.run(data, a, dry=True).flows().items():
                slot = merged.setdefault(p, {})
                for name, value in flow.items():
                    if slot.setdefault(name, value) != value:
                        raise ThresholdUsageError(f"{name!r} in pass {p} is compared against {value} in one "
                                                  f"run and {slot[name]} in another")
        return [merged[p] for p in sorted(merged)]

    def model(self, datasets: Mapping[str, Any], multi_parent: str = "refuse") -> ThresholdModel:
        """Collect every dataset's comparison values into a ``ThresholdModel``."""
        return ThresholdModel(self.decls, {name: self.collect(data) for name, data in datasets.items()},
                              multi_parent)
