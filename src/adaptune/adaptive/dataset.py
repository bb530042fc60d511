"""A set of inputs being labelled: features, per-input configuration search, and the cost matrix.

Variants with a Space first get their best configuration searched per input (a strategy from
``adaptune.search``, ask/tell, under a budget); the candidate labels are then the plain variants
plus every configuration that won on some training input, and every input is measured on every
candidate so that costs form a full matrix (inputs x labels). That matrix is what models, model
selection, active learning and evaluation need; the store makes each entry a one-time cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptune.adaptive.labelling import Input, Label, MeasureOptions, cost, measure_labels
from adaptune.adaptive.shape import VariantShape
from adaptune.progress import BestSoFarProgress
from adaptune.records import Result, Status


class LabelledSet:
    """Inputs of one code variant with lazily computed features and measured labels."""

    def __init__(self, cv: VariantShape, inputs: Sequence[Input], cache: Any, options: MeasureOptions,
                 *, labels: Sequence[Label] | None = None, search_budget: int = 20, seed: int = 0,
                 progress: bool = True, description: str = "labelling", executor: str | None = None,
                 address: str | None = None, ray_gpus: float | None = None) -> None:
        if executor not in (None, "ray"):
            raise ValueError(f"executor must be None or 'ray', got {executor!r}")
        self.executor, self.address, self.ray_gpus = executor, address, ray_gpus
        self.cv = cv
        self.inputs = list(inputs)
        self.cache = cache
        self.options = options
        self.search_budget = search_budget
        self.seed = seed
        self.show_progress = progress
        self.description = description
        self.labels: list[Label] = list(labels) if labels is not None else cv.plain_labels()
        self.features = np.full((len(self.inputs), len(cv.feature_names)), np.nan)
        self.results: list[dict[Label, Result]] = [{} for _ in self.inputs]
        self.feature_ms = np.full(len(self.inputs), np.nan)  # median feature-evaluation time per input
        self.searched: set[int] = set()
        self.measured_now = 0  # results measured in this session (not found in the store)

    # ------------------------------------------------------------------------------ features

    def _args_with_features(self, row: int) -> tuple[Any, ...]:
        args = self.inputs[row].args()
        if np.isnan(self.features[row]).any():
            self.features[row] = self.cv.features.evaluate_checked(args)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                self.cv.features_of(*args)
                times.append((time.perf_counter() - t0) * 1e3)
            self.feature_ms[row] = float(np.median(times))
            self.cache.register_input(self.inputs[row].name, dict(zip(self.cv.feature_names,
                                                                      self.features[row].tolist(), strict=True)))
        return args

    def compute_features(self, rows: Sequence[int] | None = None) -> np.ndarray:
        """Features of ``rows`` (all by default): cheap compared with labelling, so pools get them all."""
        rows = range(len(self.inputs)) if rows is None else rows
        for row in rows:
            if np.isnan(self.features[row]).any():
                self._args_with_features(row)
        return self.features[list(rows)]

    # ------------------------------------------------------------------------------ labelling

    def _measure(self, row: int, args: tuple[Any, ...], labels: Sequence[Label]) -> None:
        known = self.results[row]
        missing = [lab for lab in labels if lab not in known]
        if not missing:
            return
        name = self.inputs[row].name
        stored = self.cache.get_many(name, missing)
        known.update(stored)
        missing = [lab for lab in missing if lab not in stored]
        if not missing:
            return
        for lab, res in measure_labels(self.cv, args, missing, self.options).items():
            known[lab] = res
            self.cache.put(name, lab, res)
            self.measured_now += 1

    def _label_on_ray(self, rows: Sequence[int], grow: bool) -> None:
        """Each row's whole labelling on a Ray actor (one input per call: the searches of variants with a
        Space, then the candidate labels), with what the store already has for it; the driver stores what
        comes back as it arrives and adds the winning configurations to the candidate labels."""
        from adaptune.distributed.tasks import ray_map

        jobs, job_rows = [], []
        for row in rows:
            args = self._args_with_features(row)
            search = row not in self.searched and bool(self.cv.parametrised_variants())
            if not search and all(lab in self.results[row] for lab in self.labels):
                continue
            self.results[row].update(self.cache.get_all(self.inputs[row].name))
            if search or any(lab not in self.results[row] for lab in self.labels):
                jobs.append((self.cv, args, list(self.labels), self.options, self.search_budget, self.seed + row,
                             dict(self.results[row]), search))
                job_rows.append(row)
        winners: dict[int, list[Label]] = {}
        for k, (results, best) in ray_map(label_input, jobs, address=self.address, num_gpus=self.ray_gpus):
            row = job_rows[k]
            for lab, res in results.items():
                if lab not in self.results[row]:
                    self.results[row][lab] = res
                    self.cache.put(self.inputs[row].name, lab, res)
                    self.measured_now += 1
            if jobs[k][-1]:
                self.searched.add(row)
                winners[row] = best
        for row in sorted(winners):  # in row order, as a serial labelling adds them
            for lab in winners[row]:
                if grow and lab not in self.labels:
                    self.labels.append(lab)

    def _search(self, row: int, args: tuple[Any, ...]) -> list[Label]:
        """Best configuration of each variant with a Space on this input (every result stored as measured)."""
        def measure(labels: Sequence[Label]) -> dict[Label, Result]:
            self._measure(row, args, labels)
            return self.results[row]

        return search_variants(self.cv, measure, self.search_budget, self.seed + row)

    def label(self, rows: Sequence[int] | None = None, *, grow: bool = True) -> None:
        """Make sure ``rows`` have features, searched configurations and every candidate label measured.

        ``grow``: configurations that win here join the candidate labels (training inputs); test inputs
        are searched too (their oracle must be honest) but do not add labels a model could predict.
        """
        rows = list(range(len(self.inputs)) if rows is None else rows)
        if self.executor == "ray":  # twice: the second round measures configurations found on later rows
            self._label_on_ray(rows, grow)
            self._label_on_ray(rows, grow)
        with self._progress(len(rows)) as bar:
            for row in rows:
                args = self._args_with_features(row)
                if row not in self.searched and self.cv.parametrised_variants():
                    for lab in self._search(row, args):
                        if grow and lab not in self.labels:
                            self.labels.append(lab)
                    self.searched.add(row)
                self._measure(row, args, self.labels)
                del args
                bar.advance(best_text=self.best_label(row))
        stale = [row for row in rows if any(lab not in self.results[row] for lab in self.labels)]
        for row in stale:  # configurations found on later inputs, measured on earlier ones
            self._measure(row, self.inputs[row].args(), self.labels)

    def best_label(self, row: int) -> str:
        res = self.results[row]
        if not res:
            return "-"
        lab = min(res, key=lambda k: cost(res[k]))
        return f"{lab} ({cost(res[lab]):.3g})" if math.isfinite(cost(res[lab])) else "all failed"

    # ------------------------------------------------------------------------------ matrices

    def costs(self, rows: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(training costs, run-time costs) over the candidate labels.

        Training costs are inf for any failure; run-time costs replace a failed constraint by the
        default's cost, because that is what dispatch runs then.
        """
        rows = list(range(len(self.inputs)) if rows is None else rows)
        default = self.labels.index(self.cv.default_label)
        train = np.array([[cost(self.results[r].get(lab)) for lab in self.labels] for r in rows], float)
        train = train.reshape(len(rows), len(self.labels))
        constraint = np.array([[self.results[r].get(lab) is not None
                                and self.results[r][lab].status == Status.CONSTRAINT
                                for lab in self.labels] for r in rows], bool).reshape(train.shape)
        runtime = np.where(constraint, train[:, [default]], train)
        return train, runtime

    def oracle(self, rows: Sequence[int] | None = None) -> np.ndarray:
        """Best cost measured on each row over everything tried (searched configurations included)."""
        rows = list(range(len(self.inputs)) if rows is None else rows)
        return np.array([min((cost(r) for r in self.results[row].values()), default=math.inf) for row in rows])

    def _progress(self, total: int) -> BestSoFarProgress:
        return BestSoFarProgress(self.description, total, enabled=self.show_progress)


def search_variants(cv: VariantShape, measure: Any, search_budget: int, seed: int) -> list[Label]:
    """Best configuration of each variant with a Space on one input: its strategy (ask/tell) under its budget.

    ``measure(labels)`` measures (or finds) those labels and returns every result known for the input.
    """
    from adaptune.search import make_strategy  # only variants with a Space need the search layer

    best: list[Label] = []
    for variant in cv.parametrised_variants():
        space, strategy_name = cv.space_of(variant), cv.strategy_of(variant)
        strategy = make_strategy(strategy_name, space, seed=seed)
        budget = min(cv.budget_of(variant) or search_budget, len(space))
        tried: list[tuple[Label, float]] = []
        for _ in range(budget):
            idx = strategy.ask()
            if idx is None:
                break
            lab = Label.of(variant, space.config(int(idx)))
            c = cost(measure([lab])[lab])
            strategy.tell(int(idx), c)
            tried.append((lab, c))
        finite = [t for t in tried if math.isfinite(t[1])]
        if finite:
            best.append(min(finite, key=lambda t: t[1])[0])
    return best


def label_input(cv: VariantShape, args: tuple[Any, ...], labels: Sequence[Label], options: MeasureOptions,
                search_budget: int, seed: int, known: dict[Label, Result], search: bool = True
                ) -> tuple[dict[Label, Result], list[Label]]:
    """One input's labelling in one place (a Ray actor): the searches (if ``search``), then ``labels`` and
    the searched winners measured; ``known`` results are reused. Returns (every result, the winners)."""
    results = dict(known)

    def measure(labs: Sequence[Label]) -> dict[Label, Result]:
        missing = [lab for lab in labs if lab not in results]
        if missing:
            results.update(measure_labels(cv, args, missing, options))
        return results

    best = search_variants(cv, measure, search_budget, seed) if search else []
    measure(list(labels) + [lab for lab in best if lab not in labels])
    return results, best
