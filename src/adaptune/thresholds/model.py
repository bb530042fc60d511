"""Comparison values per dataset, candidate lists, executed-path signatures, the enumerators and the oracle.

A dataset is a list of *flows*: one flow per pass of the program (a loop iteration is a pass), each the value
every threshold is compared against in that pass. A threshold is compared in a flow when the flow has a value
for it and every dependency was compared with the required outcome; ``threshold <= value`` is its outcome.
Run time depends only on what was compared and how (the *signature*), so two assignments with equal
signatures on every dataset are the same experiment.

Enumerators: ``enumerate_seed`` is the seed's bottom-up Case 1 / Case 2 construction over the candidate lists
(it ignores which datasets reach a node, so it yields duplicates); ``enumerate_exact`` carries the flows that
reach each node and yields each distinct behaviour exactly once. ``oracle_signatures`` is the brute force
over the full candidate grid that both are tested against.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from adaptune.thresholds.tree import DEFAULT_THRESHOLD, NULLROOT, Node, ThresholdDecl, build_forest

Assignment = dict[str, int]
Flow = Mapping[str, int]
Signature = tuple[tuple[tuple[int, ...], ...], ...]


class EnumerationTooLarge(ValueError):
    """An enumeration or brute force would exceed the stated limit; the message gives the count."""


@dataclass
class ThresholdModel:
    """Thresholds, their forest and the flows of every dataset: all the enumerators need."""

    decls: list[ThresholdDecl]
    datasets: dict[str, list[dict[str, int]]]
    multi_parent: str = "refuse"
    forest: Node = field(init=False)

    def __post_init__(self) -> None:
        self.forest = build_forest(self.decls, multi_parent=self.multi_parent)
        self.names = [d.name for d in self.decls]
        self._order = _topological(self.decls)
        known = set(self.names)
        for ds, flows in self.datasets.items():
            for flow in flows:
                unknown = set(flow) - known
                if unknown:
                    raise ValueError(f"dataset {ds!r} compares undeclared threshold(s) {sorted(unknown)}")

    def subset(self, names: Iterable[str]) -> ThresholdModel:
        """The same program restricted to some datasets (train on a subset)."""
        chosen = list(names)
        missing = [n for n in chosen if n not in self.datasets]
        if missing:
            raise KeyError(f"unknown dataset(s) {missing}; known: {sorted(self.datasets)}")
        return ThresholdModel(self.decls, {n: self.datasets[n] for n in chosen}, self.multi_parent)

    def values(self) -> dict[str, list[int]]:
        """Every value each threshold is compared against, over all datasets and passes."""
        out: dict[str, set[int]] = {n: set() for n in self.names}
        for flows in self.datasets.values():
            for flow in flows:
                for name, v in flow.items():
                    out[name].add(int(v))
        return {n: sorted(v) for n, v in out.items()}

    def candidates(self) -> dict[str, list[int]]:
        """``sorted(set(values)) + [max + 1]`` per threshold; a never-compared one keeps the default only."""
        return {n: (v + [v[-1] + 1]) if v else [DEFAULT_THRESHOLD] for n, v in self.values().items()}

    def flow_signature(self, flow: Flow, assignment: Mapping[str, int], fill: int = DEFAULT_THRESHOLD
                       ) -> tuple[int, ...]:
        """Per threshold (declaration order): 0 not compared, 1 true, 2 false."""
        state: dict[str, int] = {}
        for d in self._order:
            reached = d.name in flow and all(state.get(p) == (1 if o else 2) for p, o in d.deps)
            if reached:
                state[d.name] = 1 if assignment.get(d.name, fill) <= flow[d.name] else 2
            else:
                state[d.name] = 0
        return tuple(state[n] for n in self.names)

    def dataset_signature(self, dataset: str, assignment: Mapping[str, int], fill: int = DEFAULT_THRESHOLD
                          ) -> tuple[tuple[int, ...], ...]:
        return tuple(self.flow_signature(f, assignment, fill) for f in self.datasets[dataset])

    def signature(self, assignment: Mapping[str, int], fill: int = DEFAULT_THRESHOLD) -> Signature:
        return tuple(self.dataset_signature(ds, assignment, fill) for ds in self.datasets)

    def complete(self, assignment: Mapping[str, int], fill: int = DEFAULT_THRESHOLD) -> Assignment:
        """A full assignment: thresholds the enumeration left free get ``fill`` (Futhark's default)."""
        return {n: int(assignment.get(n, fill)) for n in self.names}


def _topological(decls: Sequence[ThresholdDecl]) -> list[ThresholdDecl]:
    by_name = {d.name: d for d in decls}
    done: dict[str, None] = {}

    def visit(d: ThresholdDecl) -> None:
        if d.name in done:
            return
        for p, _ in d.deps:
            visit(by_name[p])
        done[d.name] = None

    for d in decls:
        visit(d)
    return [by_name[n] for n in done]


def naive_space_size(n_thresholds: int, limit: int = DEFAULT_THRESHOLD) -> int:
    """Every value in 1..limit for every threshold: the seed's (2^15)^4 ~ 1.153e18 for matmul."""
    return limit**n_thresholds


def _merge(a: Mapping[str, int], b: Mapping[str, int]) -> Assignment | None:
    """Union of two partial assignments; None when a duplicated threshold got two different values."""
    out = dict(a)
    for k, v in b.items():
        if out.setdefault(k, v) != v:
            return None
    return out


def _product(groups: Sequence[list[Assignment]]) -> list[Assignment]:
    out: list[Assignment] = [{}]
    for group in groups:
        nxt = []
        for a in out:
            for b in group:
                merged = _merge(a, b)
                if merged is not None:
                    nxt.append(merged)
        out = nxt
    return out


def count_seed(forest: Node, candidates: Mapping[str, Sequence[int]]) -> int:
    """How many combinations ``enumerate_seed`` yields, computed without building them (reported before
    any benchmarking). Exact for trees; an upper bound when a subtree was duplicated."""

    def count(node: Node) -> int:
        trues, falses = node.child_groups()
        t = math.prod(count(c) for c in trues)
        f = math.prod(count(c) for c in falses)
        vals = candidates[node.name]
        if len(vals) == 1:
            return 1
        return t + f + (len(vals) - 2) * t * f

    return math.prod(count(c) for c in forest.children)


def enumerate_seed(forest: Node, candidates: Mapping[str, Sequence[int]], limit: int | None = 1_000_000
                   ) -> list[Assignment]:
    """The seed's bottom-up construction (§3.3).

    Leaves give singletons. At an inner node the first (all-true) value joins the combinations of the true
    side, the last (all-false) value those of the false side, and each middle value the product of both
    sides (Case 1); several children on one side are first crossed with each other (Case 2). The synthetic
    root crosses the trees of the forest.
    """
    total = count_seed(forest, candidates)
    if limit is not None and total > limit:
        raise EnumerationTooLarge(f"the seed enumeration has {total} combinations (limit {limit})")

    def combos(node: Node) -> list[Assignment]:
        trues, falses = node.child_groups()
        t = _product([combos(c) for c in trues])
        f = _product([combos(c) for c in falses])
        vals = candidates[node.name]
        if len(vals) == 1:
            return [{node.name: vals[0]}]
        out: list[Assignment] = []
        for i, v in enumerate(vals):
            side = t if i == 0 else f if i == len(vals) - 1 else _product([t, f])
            for s in side:
                merged = _merge({node.name: v}, s)
                if merged is not None:
                    out.append(merged)
        return out

    return _product([combos(c) for c in forest.children])


def enumerate_exact(model: ThresholdModel, limit: int | None = 1_000_000) -> list[Assignment]:
    """Each distinct behaviour over the model's datasets exactly once.

    Like the seed's construction, but every node knows which flows (dataset passes) reach it: its values
    are those of the reaching flows only, each value splits them differently, and a node no flow reaches
    is left free. Values are mapped onto the global candidate lists, so results are comparable.
    """
    if len(model.forest.names()) != sum(1 for _ in model.forest.walk()):
        raise ValueError("enumerate_exact needs a tree without duplicated subtrees; "
                         "use enumerate_seed + dedup for multi-parent thresholds")
    cands = model.candidates()
    flows = [f for fs in model.datasets.values() for f in fs]
    count = [0]

    def node_combos(node: Node, reaching: list[int]) -> list[Assignment]:
        comparing = [i for i in reaching if node.name in flows[i]]
        if not comparing:
            return [{}]
        trues, falses = node.child_groups()
        vals = sorted({flows[i][node.name] for i in comparing})
        glob = cands[node.name]
        after = next(c for c in glob if c > vals[-1])
        out: list[Assignment] = []
        for c in [*vals, after]:
            tf = [i for i in comparing if c <= flows[i][node.name]]
            ff = [i for i in comparing if c > flows[i][node.name]]
            side = _product([node_combos(ch, tf) for ch in trues] + [node_combos(ch, ff) for ch in falses])
            out.extend({node.name: c, **s} for s in side)
            count[0] += len(side)
            if limit is not None and count[0] > 4 * limit:
                raise EnumerationTooLarge(f"exact enumeration exceeds {limit} combinations")
        return out

    everyone = list(range(len(flows)))
    result = _product([node_combos(c, everyone) for c in model.forest.children])
    if limit is not None and len(result) > limit:
        raise EnumerationTooLarge(f"exact enumeration has {len(result)} combinations (limit {limit})")
    return result


def dedup(model: ThresholdModel, assignments: Iterable[Mapping[str, int]]) -> list[Assignment]:
    """Keep the first assignment of each distinct signature (same executed paths on every dataset)."""
    seen: set[Signature] = set()
    out = []
    for a in assignments:
        sig = model.signature(a)
        if sig not in seen:
            seen.add(sig)
            out.append(dict(a))
    return out


def oracle_signatures(model: ThresholdModel, limit: int = 2_000_000) -> set[Signature]:
    """Brute force: the signature of every assignment in the full candidate grid."""
    cands = model.candidates()
    size = math.prod(len(v) for v in cands.values())
    if size > limit:
        raise EnumerationTooLarge(f"the candidate grid has {size} points (limit {limit})")
    names = list(cands)
    return {model.signature(dict(zip(names, point, strict=True)))
            for point in itertools.product(*(cands[n] for n in names))}


def describe(model: ThresholdModel) -> dict[str, int]:
    """The counts reported before benchmarking."""
    cands = model.candidates()
    out = {"thresholds": len(model.names), "datasets": len(model.datasets),
           "grid": math.prod(len(v) for v in cands.values()),
           "seed_combinations": count_seed(model.forest, cands)}
    return out


__all__ = ["NULLROOT", "EnumerationTooLarge", "ThresholdModel", "count_seed", "dedup", "describe",
           "enumerate_exact", "enumerate_seed", "naive_space_size", "oracle_signatures"]
