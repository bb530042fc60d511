"""Evaluation on inputs disjoint from training: how close the model's choices come to the oracle.

Reported as Nitro reports it (seed 001, fig. 2.4/2.5): per input, the chosen label's performance over
the best one found (for a minimised cost: best cost / chosen cost), its mean, the buckets <70, 70-80,
80-90, 90-100 %, the same mean for every fixed label, and the cost of features relative to the
chosen variant. The choice includes the run-time constraint fallback, exactly as dispatch runs it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import predict_many
from adaptune.adaptive.dataset import LabelledSet
from adaptune.adaptive.labelling import MeasureOptions, as_inputs
from adaptune.adaptive.shape import VariantShape

BUCKETS = ((0.0, 0.7, "<70%"), (0.7, 0.8, "70-80%"), (0.8, 0.9, "80-90%"), (0.9, math.inf, "90-100%"))


@dataclass
class EvaluationReport:
    """The numbers a user compares models and variants by (``to_dict`` is the CLI's JSON)."""

    name: str
    model: str
    labels_used: int
    n_inputs: int
    mean_fraction_of_oracle: float
    buckets: dict[str, int]
    fixed_variants: dict[str, float]
    best_fixed_variant: str
    feature_overhead: dict[str, float]
    per_input: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        fixed = ", ".join(f"{k} {v:.3f}" for k, v in sorted(self.fixed_variants.items(), key=lambda kv: -kv[1]))
        return (f"{self.name}: model {self.model} ({self.labels_used} labels) reaches "
                f"{self.mean_fraction_of_oracle:.3f} of oracle on {self.n_inputs} inputs; fixed: {fixed}; "
                f"buckets {self.buckets}; features cost {100 * self.feature_overhead['median_share']:.2f}% "
                "of the chosen variant (median)")


def bucket_counts(fractions: np.ndarray) -> dict[str, int]:
    return {name: int(((fractions >= lo) & (fractions < hi)).sum()) for lo, hi, name in BUCKETS}


def evaluate(cv: VariantShape, inputs: Iterable[Any] | Mapping[str, Any], *, db: Any = None, repeats: int = 7,
             warmup: int = 1, min_sample_ms: float = 1.0, max_call_ms: float = math.inf,
             search_budget: int = 20, seed: int = 0, progress: bool = True,
             labelled: LabelledSet | None = None) -> EvaluationReport:
    """Measure every candidate label on ``inputs`` (stored in ``db``) and score the model's choices.

    Pass ``labelled`` to reuse an already measured set (its labels must start with the model's).
    """
    if cv.model_params is None:
        raise ValueError(f"{cv.name!r} has no model to evaluate: train() or load a model first")
    model_labels = cv.model_labels
    if labelled is None:
        labels = model_labels + [lab for lab in cv.plain_labels() if lab not in model_labels]
        options = MeasureOptions(repeats=repeats, warmup=warmup, min_sample_ms=min_sample_ms,
                                 max_call_ms=max_call_ms, verify=bool(cv.verify))
        labelled = LabelledSet(cv, as_inputs(inputs), cv.open_cache(db), options, labels=labels,
                               search_budget=search_budget, seed=seed, progress=progress,
                               description=f"{cv.name}: evaluating")
        labelled.label(grow=False)
    if labelled.labels[:len(model_labels)] != model_labels:
        raise ValueError("the labelled set's labels must start with the model's labels")
    return score(cv, labelled)


def score(cv: VariantShape, labelled: LabelledSet) -> EvaluationReport:
    """Score the installed model on a labelled set (no measurement)."""
    state = cv._require_model()
    _, runtime = labelled.costs()
    oracle = labelled.oracle()
    chosen = predict_many(state.predict, labelled.features)
    rows = np.arange(len(chosen))
    valid = np.isfinite(oracle)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(np.isfinite(runtime[rows, chosen]), oracle / runtime[rows, chosen], 0.0)
        fixed = {str(lab): float(np.mean(np.where(np.isfinite(runtime[valid, j]),
                                                  oracle[valid] / runtime[valid, j], 0.0)))
                 for j, lab in enumerate(labelled.labels)}
    frac = frac[valid]
    variant_ms = runtime[rows, chosen][valid]
    timed = cv.objective == "time" and len(frac) > 0
    share = labelled.feature_ms[valid] / variant_ms if timed else np.array([math.nan])
    per_input = []
    for r in np.flatnonzero(valid):
        best_j = int(np.argmin(runtime[r]))
        per_input.append({"input": labelled.inputs[r].name, "chosen": str(labelled.labels[chosen[r]]),
                          "best": str(labelled.labels[best_j]) if runtime[r, best_j] <= oracle[r] else "searched",
                          "fraction_of_oracle": float(oracle[r] / runtime[r, chosen[r]])
                          if np.isfinite(runtime[r, chosen[r]]) else 0.0,
                          "chosen_cost": float(runtime[r, chosen[r]]), "oracle_cost": float(oracle[r]),
                          "feature_ms": float(labelled.feature_ms[r]),
                          "features": dict(zip(cv.feature_names, labelled.features[r].tolist(), strict=True))})
    best_fixed = max(fixed, key=fixed.get) if fixed else ""
    return EvaluationReport(
        name=cv.name, model=state.kind, labels_used=len(state.provenance.get("inputs", [])),
        n_inputs=int(valid.sum()), mean_fraction_of_oracle=float(np.mean(frac)) if len(frac) else math.nan,
        buckets=bucket_counts(frac), fixed_variants=fixed, best_fixed_variant=best_fixed,
        feature_overhead={"median_share": float(np.median(share)) if timed else math.nan,
                          "mean_share": float(np.mean(share)) if timed else math.nan,
                          "median_ms": float(np.nanmedian(labelled.feature_ms[valid])) if len(frac) else math.nan},
        per_input=per_input)
