"""Tuners over the threshold candidates: the seed's exhaustive search (with the early termination it proposes),
a hill-climber (the OpenTuner baseline it compares with), adaptune's ask/tell strategies, and an exact
path-memoised exhaustive search.

All tuners minimise the sum over datasets of the mean of ``repeats`` runs (Futhark's ``futhark bench``
protocol: 10 runs averaged). They draw run times from a ``PathTimes``, live or replayed, and charge every
program run they would execute to ``tuning_s`` (seconds of program run time), so the tuning cost of a
replayed tuner is the cost the live one would have paid in runs (compilation and process start excluded).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from adaptune.thresholds.model import Assignment, ThresholdModel, enumerate_exact, enumerate_seed
from adaptune.thresholds.timing import PathTimes
from adaptune.thresholds.tree import DEFAULT_THRESHOLD


@dataclass
class TuneOutcome:
    """What a tuner found and what it cost."""

    tuner: str
    best: Assignment
    best_total_ms: float
    per_dataset_ms: dict[str, float]
    evaluations: int = 0       # combinations (assignments) evaluated
    runs: int = 0              # program runs executed (dataset x repeat)
    tuning_s: float = 0.0      # program run time those runs took (s)
    wall_s: float = 0.0        # wall time of the tuner itself (replayed: bookkeeping only)
    stopped_early: int = 0     # candidates cut by early termination
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _estimate(samples: Sequence[float], repeats: int) -> float:
    """Mean of ``repeats`` runs where run r takes recorded sample r (cycling): the exhaustive protocol's value."""
    return sum(samples[r % len(samples)] for r in range(repeats)) / repeats


class _Runner:
    """Charges runs to the cost counters; the r-th run of a path takes its r-th recorded sample."""

    def __init__(self, times: PathTimes, repeats: int) -> None:
        self.times, self.repeats = times, repeats
        self.runs = 0
        self.cost_ms = 0.0

    def run(self, samples: Sequence[float], r: int) -> float:
        t = samples[r % len(samples)]
        self.runs += 1
        self.cost_ms += t
        return t

    def dataset_mean(self, dataset: str, assignment: Mapping[str, int]) -> float:
        s = self.times.samples(dataset, assignment)
        return sum(self.run(s, r) for r in range(self.repeats)) / self.repeats


def _outcome(name: str, model: ThresholdModel, times: PathTimes, best: Mapping[str, int], runner: _Runner,
             t0: float, evaluations: int, stopped_early: int = 0, **extra: Any) -> TuneOutcome:
    full = model.complete(best)
    per = {d: _estimate(times.samples(d, full), runner.repeats) for d in model.datasets}
    return TuneOutcome(name, full, sum(per.values()), per, evaluations, runner.runs, runner.cost_ms / 1e3,
                       time.perf_counter() - t0, stopped_early, extra)


def exhaustive(model: ThresholdModel, times: PathTimes, *, repeats: int = 10, early_termination: bool = True,
               combos: Sequence[Mapping[str, int]] | None = None, limit: int | None = 2_000_000,
               order: str = "fixed") -> TuneOutcome:
    """The seed's tuner: every combination of the bottom-up enumeration, each run ``repeats`` times on every
    dataset. With ``early_termination`` a candidate stops as soon as its partial total exceeds the best.
    ``order="incumbent"`` runs the datasets slowest-under-the-incumbent first, so a bad candidate is cut
    sooner (the seed notes the saving depends on order)."""
    if order not in ("fixed", "incumbent"):
        raise ValueError(f"order must be 'fixed' or 'incumbent', got {order!r}")
    t0 = time.perf_counter()
    combos = combos if combos is not None else enumerate_seed(model.forest, model.candidates(), limit)
    runner = _Runner(times, repeats)
    best: Mapping[str, int] = {}
    best_total = math.inf
    stopped = 0
    datasets = list(model.datasets)
    for combo in combos:
        done = 0.0
        cut = False
        per: dict[str, float] = {}
        for d in datasets:
            acc = 0.0
            samples = times.samples(d, combo)
            for r in range(repeats):
                acc += runner.run(samples, r)
                if early_termination and done + acc / repeats > best_total:
                    cut = True
                    break
            if cut:
                break
            done += acc / repeats
            per[d] = acc / repeats
        if cut:
            stopped += 1
        elif done < best_total:
            best_total, best = done, combo
            if order == "incumbent":
                datasets.sort(key=lambda x: -per[x])
    name = "exhaustive" + ("+early" if early_termination else "") + ("+ordered" if order == "incumbent" else "")
    return _outcome(name, model, times, best, runner, t0, len(combos), stopped_early=stopped)


def path_exhaustive(model: ThresholdModel, times: PathTimes, *, repeats: int = 10,
                    limit: int | None = 2_000_000, no_regression: bool = False,
                    early_termination: bool = False) -> TuneOutcome:
    """Exact and cheap: every distinct behaviour (``enumerate_exact``), but each (dataset, path) is run only
    the first time it occurs; every later combination is priced from those runs.

    Thresholds are shared, so the best total can make one dataset slower than untuned. ``no_regression``
    admits only combinations where no dataset is slower than with the defaults (always possible: the
    defaults' own behaviour is among the combinations). ``early_termination`` stops timing a path once its
    own mean already exceeds the best total found so far; no combination using it can win, so it is
    skipped from then on (exact: the best total only falls)."""
    t0 = time.perf_counter()
    excluded: set[tuple] = set()
    runner = _Runner(times, repeats)
    paid: set[tuple] = set()
    best: Mapping[str, int] = {}
    best_total = math.inf
    combos = enumerate_exact(model, limit)
    default = {n: DEFAULT_THRESHOLD for n in model.names}
    base = {}
    if no_regression:
        for d in model.datasets:
            paid.add(times.key(d, default))
            base[d] = runner.dataset_mean(d, default)
    # the defaults first: with early termination a good incumbent cuts slow paths sooner
    for combo in ([default] if early_termination else []) + combos:
        total = 0.0
        ok = True
        for d in model.datasets:
            key = times.key(d, combo)
            if key in excluded:
                ok = False
                break
            if key not in paid:
                samples = times.samples(d, combo)
                acc = 0.0
                for r in range(repeats):
                    acc += runner.run(samples, r)
                    if early_termination and acc / repeats > best_total:
                        break
                if early_termination and acc / repeats > best_total:
                    excluded.add(key)
                    ok = False
                    break
                paid.add(key)
            est = _estimate(times.samples(d, combo), repeats)
            if no_regression and est > base[d]:
                ok = False
            total += est
        if ok and total < best_total:
            best_total, best = total, combo
    name = "paths" + ("+no_regression" if no_regression else "") + ("+early" if early_termination else "")
    return _outcome(name, model, times, best, runner, t0, len(combos), stopped_early=len(excluded),
                    paths_run=len(paid))


def _positions(model: ThresholdModel) -> tuple[list[str], dict[str, list[int]], list[int]]:
    cands = model.candidates()
    names = model.names
    default = []
    for n in names:
        vals = cands[n]
        default.append(next((i for i, v in enumerate(vals) if v >= DEFAULT_THRESHOLD), len(vals) - 1))
    return names, cands, default


def hillclimb(model: ThresholdModel, times: PathTimes, *, repeats: int = 10, max_evals: int = 100,
              seed: int | None = 0) -> TuneOutcome:
    """The seed's baseline, OpenTuner-style: first-improvement hill climbing over each threshold's candidate
    list (one step up or down), from the untuned defaults, random restarts when stuck. Configurations are
    cached by value (as OpenTuner does), not by behaviour."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    names, cands, pos = _positions(model)
    runner = _Runner(times, repeats)
    cache: dict[tuple[int, ...], float] = {}

    def value(p: Sequence[int]) -> float:
        key = tuple(p)
        if key not in cache:
            a = {n: cands[n][i] for n, i in zip(names, p, strict=True)}
            cache[key] = sum(runner.dataset_mean(d, a) for d in model.datasets)
        return cache[key]

    grid = math.prod(len(cands[n]) for n in names)
    budget = min(max_evals, grid)
    current = list(pos)
    cur_val = value(current)
    best, best_val = list(current), cur_val
    while len(cache) < budget:
        moves = [(i, s) for i in range(len(names)) for s in (-1, 1) if 0 <= current[i] + s < len(cands[names[i]])]
        rng.shuffle(moves)
        improved = False
        for i, s in moves:
            if len(cache) >= budget:
                break
            trial = list(current)
            trial[i] += s
            v = value(trial)
            if v < cur_val:
                current, cur_val, improved = trial, v, True
                break
        if cur_val < best_val:
            best, best_val = list(current), cur_val
        if not improved:
            if len(cache) >= budget:
                break
            current = [int(rng.integers(len(cands[n]))) for n in names]
            cur_val = value(current)
    return _outcome("hillclimb", model, times, {n: cands[n][i] for n, i in zip(names, best, strict=True)},
                    runner, t0, len(cache))


def candidate_space(model: ThresholdModel):
    """An adaptune ``Space`` over the candidate lists (params ``t0..``), with constraints that pin every
    threshold no dataset can reach (an ancestor at its all-true or all-false end) to its first candidate."""
    from adaptune.space import Space

    names, cands, default = _positions(model)
    alias = {n: f"t{i}" for i, n in enumerate(names)}
    by_name = {d.name: d for d in model.decls}
    constraints = []
    for n in names:
        first = cands[n][0]
        for dep, outcome in by_name[n].deps:
            end = cands[dep][-1] if outcome else cands[dep][0]
            if len(cands[dep]) > 1:
                constraints.append(f"{alias[dep]} != {end} or {alias[n]} == {first}")
    params = {alias[n]: cands[n] for n in names}
    space = Space(params, constraints)
    return space, alias


def strategy_search(model: ThresholdModel, times: PathTimes, strategy: str = "auto", *, repeats: int = 10,
                    max_evals: int = 200, seed: int | None = 0, space_and_alias: tuple | None = None,
                    recombine: bool = False, limit: int | None = 2_000_000) -> TuneOutcome:
    """adaptune's ask/tell strategies over the candidate space; each (dataset, path) is run only once
    (run times depend on the path alone), later visits are priced from those runs.

    With ``recombine`` the search ends by pricing, at no run cost, every distinct combination whose
    per-dataset paths have all been run already, and takes the best of those too."""
    from adaptune.search import make_strategy

    t0 = time.perf_counter()
    space, alias = space_and_alias or candidate_space(model)
    back = {v: k for k, v in alias.items()}
    strat = make_strategy(strategy, space, seed=seed)
    runner = _Runner(times, repeats)
    paid: set[tuple] = set()
    best: Mapping[str, int] = {}
    best_total = math.inf
    evals = 0
    while evals < max_evals:
        idx = strat.ask()
        if idx is None:
            break
        a = {back[k]: int(v) for k, v in space.config(idx).items()}
        total = 0.0
        for d in model.datasets:
            key = times.key(d, a)
            if key not in paid:
                paid.add(key)
                runner.dataset_mean(d, a)
            total += _estimate(times.samples(d, a), repeats)
        strat.tell(idx, total)
        evals += 1
        if total < best_total:
            best_total, best = total, a
    recombined = 0
    if recombine:
        for combo in enumerate_exact(model, limit):
            keys = [times.key(d, combo) for d in model.datasets]
            if all(k in paid for k in keys):
                recombined += 1
                total = sum(_estimate(times.table[k], repeats) for k in keys)
                if total < best_total:
                    best_total, best = total, combo
    name = f"adaptune:{strategy}" + ("+recombine" if recombine else "")
    return _outcome(name, model, times, best, runner, t0, evals, paths_run=len(paid), space_size=len(space),
                    recombined=recombined)


def untuned(model: ThresholdModel, times: PathTimes) -> dict[str, float]:
    """Per-dataset mean (ms) with every threshold at Futhark's default 2^15."""
    a = {n: DEFAULT_THRESHOLD for n in model.names}
    return {d: times.mean(d, a) for d in model.datasets}


def oracle(model: ThresholdModel, times: PathTimes) -> dict[str, float]:
    """Per-dataset best over every path of that dataset alone (a lower bound for any single tuning)."""
    out = {}
    for d in model.datasets:
        out[d] = min(times.mean(d, a) for a in enumerate_exact(model.subset([d])))
    return out


TUNERS: dict[str, Callable[..., TuneOutcome]] = {"exhaustive": exhaustive, "paths": path_exhaustive,
                                                 "hillclimb": hillclimb, "strategy": strategy_search}
