"""Schedules (seed 001 §5): how each nesting level of a computation maps to parallel resources.

``independent`` (parallel, no coordination), ``cooperative`` (parallel, may coordinate), ``sequential``
(one thread). Rewrite rules independent→sequential and cooperative→sequential give a lattice per
operator sequence, topped by the strongest schedule (Table 5.3) and bottomed by all-sequential, so a
valid schedule always exists. A platform prunes it: a GPU has two parallel levels (grid, work-group;
a logical warp is a sub-level of the work-group, chosen by policy), so every level at depth > 2 must be
sequential and at most two levels may be parallel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

INDEPENDENT, COOPERATIVE, SEQUENTIAL = "independent", "cooperative", "sequential"
LEVELS = (INDEPENDENT, COOPERATIVE, SEQUENTIAL)

# Table 5.3: the strongest schedule of each operator (nested producers contribute two levels).
STRONGEST: dict[str, tuple[str, ...]] = {
    **{op: (INDEPENDENT,) for op in ("map", "gather", "scatter", "range", "replicate", "zip", "join",
                                     "striding", "cyclic", "reverse", "transpose")},
    "split": (INDEPENDENT, INDEPENDENT), "nest": (INDEPENDENT, INDEPENDENT),
    **{op: (COOPERATIVE,) for op in ("reduce", "reduce_by_key", "scan")},
}

# RR: one-step rewrites of a level.
REWRITES: dict[str, tuple[str, ...]] = {INDEPENDENT: (SEQUENTIAL,), COOPERATIVE: (SEQUENTIAL,), SEQUENTIAL: ()}


Schedule = tuple[str, ...]


def name(schedule: Schedule) -> str:
    return ".".join(schedule)


def strongest(op_sequence: Sequence[str]) -> Schedule:
    """Strongest schedule of an operator sequence such as ("map", "reduce"): one level per operator."""
    out: list[str] = []
    for op in op_sequence:
        if op not in STRONGEST:
            raise KeyError(f"operator {op!r} has no entry in the strongest-schedule table")
        out.append(STRONGEST[op][0])
    return tuple(out)


def rewrites(schedule: Schedule) -> list[Schedule]:
    """Schedules one rewrite away (one level rewritten by RR)."""
    out = []
    for i, level in enumerate(schedule):
        for new in REWRITES[level]:
            out.append(schedule[:i] + (new,) + schedule[i + 1:])
    return out


def reachable(schedule: Schedule) -> list[Schedule]:
    """w(s): every schedule reachable through the transitive closure RR+ (s itself included), in BFS order."""
    seen = {schedule: None}
    frontier = [schedule]
    while frontier:
        nxt = []
        for s in frontier:
            for r in rewrites(s):
                if r not in seen:
                    seen[r] = None
                    nxt.append(r)
        frontier = nxt
    return list(seen)


def stronger(a: Schedule, b: Schedule) -> bool:
    """a is stronger than b if b can be reached from a by rewrites (and a != b)."""
    return a != b and b in reachable(a)


@dataclass(frozen=True)
class Platform:
    """What a platform can map: ``parallel_levels`` hardware levels (GPU: grid and work-group) and a logical
    warp inside the work-group (a policy choice of the cooperative inner level)."""

    name: str = "gpu"
    parallel_levels: int = 2
    logical_warp: bool = True

    def allows(self, schedule: Schedule) -> tuple[bool, str]:
        parallel = [i for i, s in enumerate(schedule) if s != SEQUENTIAL]
        if len(parallel) > self.parallel_levels:
            return False, f"{len(parallel)} parallel levels, the {self.name} has {self.parallel_levels}"
        deep = [i for i in parallel if i >= self.parallel_levels]
        if deep:
            return False, f"level {deep[0] + 1} is parallel but only levels 1..{self.parallel_levels} map to hardware"
        return True, ""


GPU = Platform()


@dataclass(frozen=True)
class Enumeration:
    """All schedules of one operator sequence: the kept ones (strongest first) and the pruned ones with reasons."""

    op_sequence: tuple[str, ...]
    strongest: Schedule
    kept: tuple[Schedule, ...]
    pruned: tuple[tuple[Schedule, str], ...]


def enumerate_schedules(op_sequence: Iterable[str], platform: Platform = GPU) -> Enumeration:
    """The lattice below the strongest schedule, pruned by the platform."""
    ops = tuple(op_sequence)
    top = strongest(ops)
    kept, pruned = [], []
    for s in reachable(top):
        ok, why = platform.allows(s)
        if ok:
            kept.append(s)
        else:
            pruned.append((s, why))
    return Enumeration(ops, top, tuple(kept), tuple(pruned))
