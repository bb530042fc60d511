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
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptune.adaptive.labelling import Input, Label, MeasureOptions, cost, measure_labels
from adaptune.progress import BestSoFarProgress
from adaptune.records import Result, Status

if TYPE_CHECKING:
    from adaptune.adaptive.code_variant import CodeVariant


class LabelledSet:
    """Inputs of one code variant with lazily computed features and measured labels."""

    def __init__(self, cv: CodeVariant, inputs: Sequence[Input], cache: Any, options: MeasureOptions,
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

    def _measure_on_ray(self, rows: Sequence[int]) -> None:
        """The candidate labels of every row measured at once on Ray actors (one input per call); stored as
        they arrive. Searches of variants with a Space stay in the driver (each is a sequence of asks)."""
        from adaptune.adaptive.labelling import measure_labels
        from adaptune.distributed.tasks import ray_map

        jobs, job_rows = [], []
        for row in rows:
            args = self._args_with_features(row)
            known = self.results[row]
            missing = [lab for lab in self.labels if lab not in known]
            stored = self.cache.get_many(self.inputs[row].name, missing) if missing else {}
            known.update(stored)
            missing = [lab for lab in missing if lab not in stored]
            if missing:
                jobs.append((self.cv, args, missing, self.options))
                job_rows.append(row)
        for k, measured in ray_map(measure_labels, jobs, address=self.address, num_gpus=self.ray_gpus):
            row = job_rows[k]
            for lab, res in measured.items():
                self.results[row][lab] = res
                self.cache.put(self.inputs[row].name, lab, res)
                self.measured_now += 1

    def _search(self, row: int, args: tuple[Any, ...]) -> list[Label]:
        """Best configuration of each variant with a Space on this input."""
        from adaptune.search import make_strategy  # only variants with a Space need the search layer

        best: list[Label] = []
        for variant in self.cv.parametrised_variants():
            space, strategy_name = self.cv.space_of(variant), self.cv.strategy_of(variant)
            strategy = make_strategy(strategy_name, space, seed=self.seed + row)
            budget = min(self.cv.budget_of(variant) or self.search_budget, len(space))
            tried: list[Label] = []
            for _ in range(budget):
                idx = strategy.ask()
                if idx is None:
                    break
                lab = Label.of(variant, space.config(int(idx)))
                self._measure(row, args, [lab])
                strategy.tell(int(idx), cost(self.results[row][lab]))
                tried.append(lab)
            finite = [lab for lab in tried if math.isfinite(cost(self.results[row][lab]))]
            if finite:
                best.append(min(finite, key=lambda lab: cost(self.results[row][lab])))
        return best

    def label(self, rows: Sequence[int] | None = None, *, grow: bool = True) -> None:
        """Make sure ``rows`` have features, searched configurations and every candidate label measured.

        ``grow``: configurations that win here join the candidate labels (training inputs); test inputs
        are searched too (their oracle must be honest) but do not add labels a model could predict.
        """
        rows = list(range(len(self.inputs)) if rows is None else rows)
        if self.executor == "ray":
            self._measure_on_ray(rows)
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
